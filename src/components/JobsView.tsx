import {
  caretLeftIcon,
  caretRightIcon,
  deleteIcon,
  redoIcon,
  stopIcon
} from '@jupyterlab/ui-components';
import { showErrorMessage } from '@jupyterlab/apputils';
import * as React from 'react';

import { MAX_COMPARED } from '../api';
import { formatAge, jobDuration } from '../format';
import { asApiError, HyperpodModel } from '../model';
import { IJob, isFinished, ISweepSummary, JobState } from '../models';
import { isStalled, operatorVerdictLine, watchdogLine } from '../watchdog';
import {
  ErrorMessage,
  IconButton,
  JobProgress,
  Loading,
  RefreshButton,
  StateBadge,
  useTick,
  useSignal
} from './common';
import { SweepRows } from './SweepRows';

export interface IJobsViewProps {
  model: HyperpodModel;
  openJob: (job: IJob) => void;
  cancelJob: (job: IJob) => void;
  resubmitJob: (job: IJob) => void;
  /** Cancel several jobs (confirmed once for all). */
  cancelJobs?: (jobs: IJob[]) => void;
  /** Remove jobs from the history, files kept or deleted as the user chooses (confirmed). */
  removeJobs?: (jobs: IJob[]) => void;
  /** Compare 2 to MAX_COMPARED jobs side by side (one main-area tab). */
  compareJobs?: (jobs: IJob[]) => void;
}

const STATES: JobState[] = [
  'PENDING',
  'RUNNING',
  'SUCCEEDED',
  'FAILED',
  'CANCELLED'
];

export function resources(job: IJob): string {
  const spec = job.spec;
  const nodes = spec.nodes ?? 1;
  const procs = spec.procs_per_node ?? 1;
  const gpus = (spec.gpus_per_node ?? 0) * nodes;
  const parts = [`${nodes} node${nodes === 1 ? '' : 's'}`];
  if (procs > 1) {
    parts.push(`${nodes * procs} ranks`);
  }
  if (gpus > 0) {
    parts.push(`${gpus} GPU${gpus === 1 ? '' : 's'}`);
  }
  return parts.join(' · ');
}

function JobRow(
  props: IJobsViewProps & {
    job: IJob;
    selected: boolean;
    onSelect: (selected: boolean) => void;
  }
): JSX.Element {
  const { job, model } = props;
  const canCancel =
    !isFinished(job.state) && (model.cluster?.capabilities.cancel ?? true);
  return (
    <li
      className={`jp-hyperpod-JobRow ${props.selected ? 'jp-mod-selected' : ''}`}
      data-job={job.name}
      data-state={job.state}
    >
      {(props.removeJobs || props.cancelJobs || props.compareJobs) && (
        <input
          type="checkbox"
          className="jp-hyperpod-JobRow-select"
          checked={props.selected}
          aria-label={`Select ${job.name}`}
          onChange={event => props.onSelect(event.target.checked)}
        />
      )}
      <button
        className="jp-hyperpod-JobRow-open"
        title={`Open ${job.name}: details, logs and metrics`}
        onClick={() => props.openJob(job)}
      >
        <span className="jp-hyperpod-JobRow-line">
          <span className="jp-hyperpod-JobRow-name" title={job.name}>
            {job.name}
          </span>
        </span>
        <span className="jp-hyperpod-JobRow-line jp-hyperpod-JobRow-sub">
          <StateBadge state={job.state} title={job.state_reason ?? undefined} />
          <span title={new Date(job.created * 1000).toString()}>
            {formatAge(job.created)}
          </span>
          <span>{resources(job)}</span>
          {job.started !== null && (
            <span title="Run time">{jobDuration(job.started, job.ended)}</span>
          )}
          {job.exit_code !== null && job.state !== 'SUCCEEDED' && (
            <span>exit {job.exit_code}</span>
          )}
        </span>
        {job.state === 'RUNNING' && job.progress && (
          <span className="jp-hyperpod-JobRow-line jp-hyperpod-JobRow-sub">
            <JobProgress progress={job.progress} />
          </span>
        )}
        {watchdogLine(job) && (
          <span
            className={`jp-hyperpod-JobRow-line jp-hyperpod-JobRow-sub jp-hyperpod-JobRow-watchdog${isStalled(job) ? ' jp-mod-stalled' : ''}`}
            title={job.watchdog?.stalled_detail ?? undefined}
          >
            {watchdogLine(job)}
          </span>
        )}
        {operatorVerdictLine(job) && (
          <span
            className="jp-hyperpod-JobRow-line jp-hyperpod-JobRow-sub jp-hyperpod-JobRow-operator"
            title={job.operator_verdict?.message ?? undefined}
          >
            {operatorVerdictLine(job)}
          </span>
        )}
        {job.state === 'PENDING' && job.state_reason && (
          <span
            className="jp-hyperpod-JobRow-line jp-hyperpod-JobRow-sub jp-hyperpod-JobRow-why"
            title={job.state_reason}
          >
            {job.state_reason}
          </span>
        )}
      </button>
      <span className="jp-hyperpod-JobRow-actions">
        {canCancel && (
          <IconButton
            icon={stopIcon}
            title={`Cancel ${job.name}`}
            className="jp-hyperpod-cancel"
            onClick={() => props.cancelJob(job)}
          />
        )}
        <IconButton
          icon={redoIcon}
          title={`Resubmit ${job.name} (opens the form prefilled)`}
          onClick={() => props.resubmitJob(job)}
        />
        {props.removeJobs && (
          <IconButton
            icon={deleteIcon}
            title={`Remove ${job.name} from the history`}
            className="jp-hyperpod-remove"
            onClick={() => props.removeJobs?.([job])}
          />
        )}
      </span>
    </li>
  );
}

/** Cancel every unfinished member of a sweep; its rows show the outcome at once. */
function cancelSweep(model: HyperpodModel, summary: ISweepSummary): void {
  model.client
    .cancelSweep(summary.id)
    .then(sweep => sweep.jobs.forEach(job => model.upsertJob(job)))
    .catch(reason =>
      showErrorMessage(
        `Cancel sweep ${summary.name}`,
        asApiError(reason).message
      )
    )
    .finally(() => void model.refreshJobs());
}

export function JobsView(props: IJobsViewProps): JSX.Element {
  const { model } = props;
  useSignal(model.jobsChanged);
  useSignal(model.clusterChanged);
  const [text, setText] = React.useState('');
  const jobs = model.jobs;
  // Running times tick here each second from the server's start time (no refetch).
  useTick((jobs ?? []).some(job => job.state === 'RUNNING') ? 1000 : 15000);
  const needle = text.trim().toLowerCase();
  const shown = (jobs ?? []).filter(
    job =>
      !needle ||
      job.name.toLowerCase().includes(needle) ||
      job.id.toLowerCase().includes(needle) ||
      (job.backend_id ?? '').toLowerCase().includes(needle)
  );
  const total = model.jobsTotal;
  const offset = model.jobsOffset;
  const pageSize = model.jobsPageSize;
  // Selected job ids; those no longer listed drop out.
  const [selected, setSelected] = React.useState<Set<string>>(new Set());
  const chosen = shown.filter(job => selected.has(job.id));
  const cancellable = chosen.filter(job => !isFinished(job.state));
  const select = (job: IJob, on: boolean) => {
    const next = new Set(selected);
    if (on) {
      next.add(job.id);
    } else {
      next.delete(job.id);
    }
    setSelected(next);
  };
  const allSelected = shown.length > 0 && chosen.length === shown.length;

  return (
    <div className="jp-hyperpod-View jp-hyperpod-JobsView">
      <div className="jp-hyperpod-Filters">
        <input
          className="jp-mod-styled jp-hyperpod-Filter-text"
          type="search"
          placeholder="Filter jobs by name"
          aria-label="Filter jobs by name"
          value={text}
          onChange={event => setText(event.target.value)}
        />
        <select
          className="jp-mod-styled"
          aria-label="Filter jobs by state"
          value={model.jobsState}
          onChange={event => {
            model.jobsState = event.target.value as JobState | '';
          }}
        >
          <option value="">All states</option>
          {STATES.map(state => (
            <option key={state} value={state}>
              {state}
            </option>
          ))}
        </select>
        <RefreshButton
          title="Refresh jobs"
          onClick={() => void model.refreshJobs()}
        />
      </div>
      <ErrorMessage
        error={model.jobsError}
        stale={jobs !== null}
        onRetry={() => void model.refreshJobs()}
      />
      {(props.removeJobs || props.cancelJobs || props.compareJobs) &&
        shown.length > 0 && (
          <div
            className="jp-hyperpod-BulkBar"
            role="toolbar"
            aria-label="Selected jobs"
          >
            <label className="jp-hyperpod-BulkBar-all">
              <input
                type="checkbox"
                checked={allSelected}
                aria-label="Select all jobs shown"
                onChange={event =>
                  setSelected(
                    event.target.checked
                      ? new Set(shown.map(job => job.id))
                      : new Set()
                  )
                }
              />
              {chosen.length > 0 ? `${chosen.length} selected` : 'Select'}
            </label>
            {chosen.length > 0 && props.compareJobs && (
              <button
                type="button"
                className="jp-Button jp-mod-styled jp-mod-accept jp-hyperpod-BulkBar-compare"
                disabled={chosen.length < 2 || chosen.length > MAX_COMPARED}
                title={
                  chosen.length < 2
                    ? 'Select two or more jobs to compare'
                    : chosen.length > MAX_COMPARED
                      ? `Compare takes at most ${MAX_COMPARED} jobs`
                      : 'Spec, config, code and metrics side by side'
                }
                onClick={() =>
                  // Oldest first: the columns, and the diff, run from the earlier job to the later.
                  props.compareJobs?.(
                    [...chosen].sort((x, y) => x.created - y.created)
                  )
                }
              >
                Compare {chosen.length}
              </button>
            )}
            {chosen.length > 0 && props.cancelJobs && (
              <button
                type="button"
                className="jp-Button jp-mod-styled jp-mod-reject jp-hyperpod-BulkBar-cancel"
                disabled={cancellable.length === 0}
                onClick={() => {
                  props.cancelJobs?.(cancellable);
                }}
              >
                Cancel {cancellable.length}
              </button>
            )}
            {chosen.length > 0 && props.removeJobs && (
              <button
                type="button"
                className="jp-Button jp-mod-styled jp-mod-warn jp-hyperpod-BulkBar-remove"
                onClick={() => {
                  props.removeJobs?.(chosen);
                  setSelected(new Set());
                }}
              >
                Remove {chosen.length}
              </button>
            )}
          </div>
        )}
      {jobs !== null && (
        <SweepRows
          sweeps={model.sweeps}
          jobs={jobs}
          compareJobs={props.compareJobs}
          cancelSweep={summary => cancelSweep(model, summary)}
        />
      )}
      {jobs === null ? (
        model.jobsError ? null : (
          <Loading what="jobs" />
        )
      ) : shown.length === 0 ? (
        <div className="jp-hyperpod-Empty">
          {jobs.length === 0
            ? 'No job yet. Submit one from the Submit tab or from a script in Files.'
            : 'No job matches the filter.'}
        </div>
      ) : (
        <ul className="jp-hyperpod-JobList" aria-label="Jobs">
          {shown.map(job => (
            <JobRow
              key={job.id}
              job={job}
              {...props}
              selected={selected.has(job.id)}
              onSelect={on => select(job, on)}
            />
          ))}
        </ul>
      )}
      {total > pageSize && (
        <div className="jp-hyperpod-Pager">
          <IconButton
            icon={caretLeftIcon}
            title="Newer jobs"
            disabled={offset === 0}
            onClick={() => {
              model.jobsOffset = offset - pageSize;
            }}
          />
          <span>
            {offset + 1}–{Math.min(total, offset + pageSize)} of {total}
          </span>
          <IconButton
            icon={caretRightIcon}
            title="Older jobs"
            disabled={offset + pageSize >= total}
            onClick={() => {
              model.jobsOffset = offset + pageSize;
            }}
          />
        </div>
      )}
    </div>
  );
}
