/**
 * Jobs as columns, what sets them apart as rows: state, run time, exit code, commit, every
 * spec/config value that is not the same in all of them, each metric's final value and the
 * ROUGE scores of evaluate jobs (fine-tuned, with the delta to the base), as `GET compare` says.
 */
import * as React from 'react';

import { formatDuration } from '../../format';
import { IComparedJob, IJobComparison } from '../../models';
import { StateBadge } from '../common';
import { delta, score } from '../EvaluateView';
import { showCommit, showValue } from './values';

interface IRow {
  key: string;
  label: string;
  kind: string;
  cell: (job: IComparedJob) => React.ReactNode;
  title?: (job: IComparedJob) => string | undefined;
}

function rougeNames(comparison: IJobComparison): string[] {
  const names: string[] = [];
  for (const job of comparison.jobs) {
    for (const row of job.evaluation?.rouge ?? []) {
      if (!names.includes(row.name)) {
        names.push(row.name);
      }
    }
  }
  return names;
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
  for (const metric of comparison.metrics) {
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
  for (const name of rougeNames(comparison)) {
    rows.push({
      key: `rouge:${name}`,
      label: `${name} (fine-tuned, Δ base)`,
      kind: 'rouge',
      cell: job => {
        const row = job.evaluation?.rouge.find(r => r.name === name);
        return row ? `${score(row.finetuned)} (${delta(row.delta)})` : '–';
      }
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
            {comparison.jobs.map(job => (
              <th key={job.id} scope="col" title={job.id} data-job={job.id}>
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
