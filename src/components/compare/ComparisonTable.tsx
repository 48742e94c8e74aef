/**
 * Jobs as columns, what sets them apart as rows: state, run time, exit code, commit, every
 * spec/config value that is not the same in all of them, each metric's final value and the
 * ROUGE table of evaluate jobs (each variant's base, fine-tuned and delta: the evaluate job's
 * own RougeTable), as `GET compare` says. Each column's swatch is its job's curve colour.
 */
import * as React from 'react';

import { formatDuration } from '../../format';
import { sortMetricNames } from '../../metrics';
import { IComparedJob, IJobComparison } from '../../models';
import { StateBadge } from '../common';
import { RougeTable } from '../EvaluateView';
import { SERIES_COLORS } from '../LineChart';
import { showCommit, showValue } from './values';

interface IRow {
  key: string;
  label: string;
  kind: string;
  cell: (job: IComparedJob) => React.ReactNode;
  title?: (job: IComparedJob) => string | undefined;
}

/** The table's rows, in the order they are shown. */
export function comparisonRows(comparison: IJobComparison): IRow[] {
  const rows: IRow[] = [
    {
      key: 'state',
      label: 'State',
      kind: 'outcome',
      cell: job => <StateBadge state={job.state} />
    },
    {
      key: 'duration',
      label: 'Run time',
      kind: 'outcome',
      cell: job => (job.duration === null ? '–' : formatDuration(job.duration))
    },
    {
      key: 'exit_code',
      label: 'Exit code',
      kind: 'outcome',
      cell: job => showValue(job.exit_code)
    },
    {
      key: 'commit',
      label: 'Commit',
      kind: 'outcome',
      cell: job => showCommit(job.commit, job.dirty),
      title: job => job.commit ?? undefined
    }
  ];
  for (const field of comparison.differing) {
    rows.push({
      key: `value:${field}`,
      label: field,
      kind: 'value',
      cell: job => showValue(job.values[field])
    });
  }
  // The ROUGE scores are in their table (the last row): not again as metric rows.
  const scored = new Set(
    comparison.jobs.flatMap(job => job.evaluation?.metric_names ?? [])
  );
  const metrics = sortMetricNames(comparison.metrics).filter(
    name => !scored.has(name)
  );
  for (const metric of metrics) {
    rows.push({
      key: `metric:${metric}`,
      label: metric,
      kind: 'metric',
      cell: job => showValue(job.final_metrics[metric]?.value ?? null),
      title: job => {
        const point = job.final_metrics[metric];
        return point
          ? `step ${point.step}`
          : (job.metrics_message ?? undefined);
      }
    });
  }
  if (comparison.jobs.some(job => job.evaluation)) {
    rows.push({
      key: 'rouge',
      label: 'ROUGE (base vs fine-tuned)',
      kind: 'rouge',
      cell: job =>
        job.evaluation ? <RougeTable evaluation={job.evaluation} /> : '–'
    });
  }
  return rows;
}

export function ComparisonTable(props: {
  comparison: IJobComparison;
}): JSX.Element {
  const { comparison } = props;
  return (
    <div className="jp-hyperpod-Compare-scroll">
      <table
        className="jp-hyperpod-Table jp-hyperpod-CompareTable"
        aria-label="Jobs side by side"
      >
        <thead>
          <tr>
            <th scope="col">Job</th>
            {comparison.jobs.map((job, index) => (
              <th key={job.id} scope="col" title={job.id} data-job={job.id}>
                <span
                  className="jp-hyperpod-Swatch"
                  data-series={index % SERIES_COLORS}
                  aria-hidden="true"
                />
                {job.name}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {comparisonRows(comparison).map(row => (
            <tr key={row.key} data-row={row.key} data-kind={row.kind}>
              <th scope="row">{row.label}</th>
              {comparison.jobs.map(job => (
                <td key={job.id} title={row.title?.(job)}>
                  {row.cell(job)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
