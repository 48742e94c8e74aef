/**
 * The comparison tab: jobs side by side (`GET compare`), their metric curves overlaid (each
 * job's `GET jobs/{id}/metrics`) and, for two jobs, what differs between them
 * (`GET jobs/{a}/diff/{b}`); each loaded on open and on Refresh, each failing on its own with
 * the server's message.
 */
import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { HyperpodClient } from '../../api';
import { ApiError } from '../../handler';
import { asApiError } from '../../model';
import { IJobComparison, IJobDiff } from '../../models';
import { ErrorMessage, Loading, RefreshButton } from '../common';
import { ViewBoundary } from '../ViewBoundary';
import { CompareCurves, CurvesClient } from './CompareCurves';
import { ComparisonTable } from './ComparisonTable';
import { JobDiffView } from './JobDiffView';

export type CompareClient = Pick<HyperpodClient, 'compare' | 'diff'> &
  CurvesClient;

export interface ICompareViewProps {
  client: CompareClient;
  /** The jobs compared, in their columns' order (2 to MAX_COMPARED). */
  ids: string[];
}

interface ILoaded<T> {
  value: T | null;
  error: ApiError | null;
}

function useLoad<T>(
  load: (() => Promise<T>) | null,
  serial: number
): ILoaded<T> | null {
  const [state, setState] = React.useState<ILoaded<T> | null>(null);
  React.useEffect(() => {
    if (!load) {
      return;
    }
    let live = true;
    load().then(
      value => live && setState({ value, error: null }),
      error => live && setState({ value: null, error: asApiError(error) })
    );
    return () => {
      live = false;
    };
  }, [serial]);
  return state;
}

export function CompareView(props: ICompareViewProps): JSX.Element {
  const { client, ids } = props;
  const [serial, setSerial] = React.useState(0);
  const comparison = useLoad<IJobComparison>(() => client.compare(ids), serial);
  const diff = useLoad<IJobDiff>(
    ids.length === 2 ? () => client.diff(ids[0], ids[1]) : null,
    serial
  );
  const names: Record<string, string> = {};
  for (const job of comparison?.value?.jobs ?? []) {
    names[job.id] = job.name;
  }
  // The columns' order and names once the comparison has them (the curves' colours follow it).
  const jobs = comparison?.value?.jobs ?? ids.map(id => ({ id, name: id }));
  return (
    <div className="jp-hyperpod-View jp-hyperpod-CompareView">
      <div className="jp-hyperpod-Compare-head">
        <h2 className="jp-hyperpod-Section-title">Compare {ids.length} jobs</h2>
        <RefreshButton
          title="Compare again"
          onClick={() => setSerial(s => s + 1)}
        />
      </div>
      {comparison === null ? (
        <Loading what="the comparison" />
      ) : comparison.value ? (
        <>
          <ComparisonTable comparison={comparison.value} />
          {comparison.value.notes.length > 0 && (
            <ul
              className="jp-hyperpod-Diff-notes"
              aria-label="Comparison notes"
            >
              {comparison.value.notes.map(note => (
                <li key={note}>{note}</li>
              ))}
            </ul>
          )}
        </>
      ) : (
        <ErrorMessage error={comparison.error} />
      )}
      {comparison !== null && (
        <CompareCurves client={client} jobs={jobs} serial={serial} />
      )}
      {ids.length === 2 &&
        (diff === null ? (
          <Loading what="the diff" />
        ) : diff.value ? (
          <JobDiffView diff={diff.value} names={names} />
        ) : (
          <ErrorMessage error={diff.error} />
        ))}
    </div>
  );
}

/** The set's key: the same jobs in any order are one comparison (one tab). */
export function compareKey(ids: string[]): string {
  return [...ids].sort().join(',');
}

/** The comparison in a main-area tab. */
export class CompareWidget extends ReactWidget {
  constructor(
    private readonly _props: ICompareViewProps,
    /** The jobs' names, for the tab's title (and its restore after a reload). */
    readonly names: string[] = _props.ids
  ) {
    super();
    this.key = compareKey(_props.ids);
    this.addClass('jp-hyperpod-CompareWidget');
  }

  readonly key: string;

  get ids(): string[] {
    return this._props.ids;
  }

  render(): JSX.Element {
    return (
      <ViewBoundary view="Compare">
        <CompareView {...this._props} />
      </ViewBoundary>
    );
  }
}
