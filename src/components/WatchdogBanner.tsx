import { redoIcon, stopIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { ApiError } from '../handler';
import { asApiError } from '../model';
import { IJob, IStackDump } from '../models';
import { stackRows, suspectNodes, watchdogLine } from '../watchdog';
import { ErrorMessage, IconButton } from './common';

export interface IWatchdogBannerProps {
  client: HyperpodClient;
  job: IJob;
  cancelJob: (job: IJob) => void;
  resubmitJob: (job: IJob, excludeNodes?: string[]) => void;
}

/**
 * A running job's watchdog: stalled since when and which ranks stopped first on which nodes,
 * with Cancel, Resubmit without the suspect nodes and Dump stacks; or its stragglers.
 */
export function WatchdogBanner(
  props: IWatchdogBannerProps
): JSX.Element | null {
  const { job } = props;
  const [dump, setDump] = React.useState<IStackDump | null>(null);
  const [busy, setBusy] = React.useState(false);
  const [error, setError] = React.useState<ApiError | null>(null);
  const line = watchdogLine(job);
  const watchdog = job.watchdog;
  if (!line || !watchdog) {
    return dump ? <StacksTable dump={dump} /> : null;
  }
  const stalled = !!watchdog.stalled_since;
  const suspects = suspectNodes(job);
  const dumpStacks = () => {
    setBusy(true);
    setError(null);
    props.client
      .dumpStacks(job.id)
      .then(setDump, e => setError(asApiError(e)))
      .finally(() => setBusy(false));
  };
  return (
    <div
      className={`jp-hyperpod-Watchdog ${stalled ? 'jp-mod-stalled' : 'jp-mod-straggler'}`}
      role={stalled ? 'alert' : 'status'}
    >
      <div className="jp-hyperpod-Watchdog-line">{line}</div>
      {stalled && watchdog.stalled_detail && (
        <div className="jp-hyperpod-Watchdog-detail">
          {watchdog.stalled_detail}
        </div>
      )}
      {stalled && (
        <div className="jp-hyperpod-Watchdog-actions">
          <IconButton
            icon={stopIcon}
            title={`Cancel ${job.name}`}
            label="Cancel"
            onClick={() => props.cancelJob(job)}
          />
          {suspects.length > 0 && (
            <IconButton
              icon={redoIcon}
              title={`Resubmit, excluding ${suspects.join(', ')}`}
              label={`Resubmit without ${suspects.join(', ')}`}
              onClick={() => props.resubmitJob(job, suspects)}
            />
          )}
          <button
            type="button"
            className="jp-Button jp-mod-minimal"
            disabled={busy}
            onClick={dumpStacks}
          >
            {busy ? 'Dumping stacks…' : 'Dump stacks'}
          </button>
        </div>
      )}
      <ErrorMessage error={error} />
      {dump && <StacksTable dump={dump} />}
    </div>
  );
}

/** The ranks' main threads side by side, outermost frame first; differing frames marked. */
export function StacksTable(props: { dump: IStackDump }): JSX.Element {
  const { dump } = props;
  const rows = stackRows(dump);
  return (
    <div className="jp-hyperpod-Stacks">
      <table>
        <thead>
          <tr>
            {dump.ranks.map(r => (
              <th key={r.rank}>
                rank {r.rank}
                {r.node ? ` (${r.node})` : ''}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row, depth) => (
            <tr key={depth}>
              {row.map((frame, rank) => (
                <td
                  key={rank}
                  className={frame?.differs ? 'jp-hyperpod-Stacks-differs' : ''}
                  title={frame ? `${frame.filename}:${frame.line}` : ''}
                >
                  {frame
                    ? `${frame.name} (${frame.filename}:${frame.line})`
                    : ''}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {dump.ranks
        .filter(r => r.error)
        .map(r => (
          <p key={r.rank} className="jp-hyperpod-Stacks-error">
            rank {r.rank}: {r.error}
            {r.fix ? ` — ${r.fix}` : ''}
          </p>
        ))}
    </div>
  );
}
