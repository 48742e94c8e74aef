import {
  caretLeftIcon,
  caretRightIcon,
  redoIcon,
  stopIcon
} from '@jupyterlab/ui-components';
import * as React from 'react';

import { formatAge, jobDuration } from '../format';
import { HyperpodModel } from '../model';
import { IJob, isFinished, JobState } from '../models';
import {
  ErrorMessage,
  IconButton,
  Loading,
  RefreshButton,
  StateBadge,
  useTick,
  useSignal
} from './common';

export interface IJobsViewProps {
  model: HyperpodModel;
  openJob: (job: IJob) => void;
  cancelJob: (job: IJob) => void;
  resubmitJob: (job: IJob) => void;
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

function JobRow(props: IJobsViewProps & { job: IJob }): JSX.Element {
  const { job, model } = props;
  const canCancel =
    !isFinished(job.state) && (model.cluster?.capabilities.cancel ?? true);
  return (
    <li
      className="jp-hyperpod-JobRow"
      data-job={job.name}
      data-state={job.state}
    >
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
      </span>
    </li>
  );
}

export function JobsView(props: IJobsViewProps): JSX.Element {
  const { model } = props;
  useSignal(model.changed);
  const [text, setText] = React.useState('');
  useTick(15000);
  const jobs = model.jobs;
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
            <JobRow key={job.id} job={job} {...props} />
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
