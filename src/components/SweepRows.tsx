/**
 * The Jobs list's group rows (#24 item 3): one per sweep whose members the list shows, with its
 * progress, its members per state, the best member so far by the sweep's metric, and two
 * actions: Compare (the members side by side, at most MAX_COMPARED) and Cancel (every
 * unfinished member, `POST sweeps/{id}/cancel`).
 */
import * as React from 'react';

import { MAX_COMPARED } from '../api';
import { IJob, ISweepSummary, JobState } from '../models';
import { StateBadge } from './common';

const ORDER: JobState[] = [
  'RUNNING',
  'PENDING',
  'SUCCEEDED',
  'FAILED',
  'CANCELLED'
];

/** "2 running, 1 pending (1 waiting for a slot), 1 succeeded". */
export function sweepCounts(summary: ISweepSummary): string {
  const parts = ORDER.filter(state => (summary.counts[state] ?? 0) > 0).map(
    state => {
      const text = `${summary.counts[state]} ${state.toLowerCase()}`;
      const waiting = summary.counts.waiting ?? 0;
      return state === 'PENDING' && waiting > 0
        ? `${text} (${waiting} waiting for a slot)`
        : text;
    }
  );
  return parts.join(', ');
}

/** "best loss 3.687 (qlora-lr2e-4-r16)", or '' while no member logged the metric. */
export function sweepBest(summary: ISweepSummary): string {
  const best = summary.best;
  if (!best) {
    return '';
  }
  return `best ${summary.metric} ${Number(best.value.toPrecision(4))} (${best.name})`;
}

export interface ISweepRowsProps {
  sweeps: ISweepSummary[];
  /** The jobs listed now: the members Compare takes. */
  jobs: IJob[];
  compareJobs?: (jobs: IJob[]) => void;
  cancelSweep?: (summary: ISweepSummary) => void;
}

export function SweepRows(props: ISweepRowsProps): JSX.Element | null {
  const listed = new Set(props.jobs.map(job => job.id));
  const shown = props.sweeps.filter(summary =>
    summary.members.some(id => listed.has(id))
  );
  if (shown.length === 0) {
    return null;
  }
  return (
    <ul className="jp-hyperpod-SweepList" aria-label="Sweeps">
      {shown.map(summary => {
        const members = props.jobs
          .filter(job => summary.members.includes(job.id))
          .sort((a, b) => a.created - b.created)
          .slice(0, MAX_COMPARED);
        const finished = Math.round(summary.progress * summary.size);
        const unfinished =
          (summary.counts.PENDING ?? 0) + (summary.counts.RUNNING ?? 0);
        const cap = summary.max_concurrent
          ? `, at most ${summary.max_concurrent} at once`
          : '';
        return (
          <li
            key={summary.id}
            className="jp-hyperpod-SweepRow"
            aria-label={`Sweep ${summary.name}`}
          >
            <div className="jp-hyperpod-SweepRow-head">
              <StateBadge state={summary.state} />
              <span className="jp-hyperpod-SweepRow-name">
                Sweep {summary.name}
              </span>
              <span className="jp-hyperpod-SweepRow-done">
                {finished}/{summary.size} done
              </span>
            </div>
            <progress
              className="jp-hyperpod-SweepRow-progress"
              max={1}
              value={summary.progress}
              aria-label={`${summary.name}: ${Math.round(summary.progress * 100)}% done`}
            />
            <div className="jp-hyperpod-SweepRow-counts">
              {sweepCounts(summary)}
              {cap} · swept {summary.fields.join(', ')}
            </div>
            {summary.best && (
              <div className="jp-hyperpod-SweepRow-best">
                {sweepBest(summary)}
              </div>
            )}
            <div className="jp-hyperpod-SweepRow-actions">
              {props.compareJobs && (
                <button
                  type="button"
                  className="jp-Button jp-mod-styled jp-hyperpod-SweepRow-compare"
                  disabled={members.length < 2}
                  title={
                    members.length < 2
                      ? 'Two or more members must be listed to compare'
                      : `The first ${members.length} members side by side`
                  }
                  onClick={() => props.compareJobs?.(members)}
                >
                  Compare {members.length}
                </button>
              )}
              {props.cancelSweep && (
                <button
                  type="button"
                  className="jp-Button jp-mod-styled jp-mod-reject jp-hyperpod-SweepRow-cancel"
                  disabled={unfinished === 0}
                  onClick={() => props.cancelSweep?.(summary)}
                >
                  Cancel {unfinished}
                </button>
              )}
            </div>
          </li>
        );
      })}
    </ul>
  );
}
