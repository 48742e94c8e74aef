import { redoIcon, stopIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { formatDate, jobDuration } from '../format';
import { ApiError } from '../handler';
import { asApiError, HyperpodModel } from '../model';
import { IJob, isFinished } from '../models';
import {
  ErrorMessage,
  IconButton,
  JobProgress,
  RefreshButton,
  StateBadge,
  useSignal,
  useTick
} from './common';
import { ViewBoundary } from './ViewBoundary';
import { resources } from './JobsView';
import { failedRank } from '../diagnosis';
import { JobDiagnosis } from './JobDiagnosis';
import { WatchdogBanner } from './WatchdogBanner';
import { operatorVerdictLine } from '../watchdog';
import { LogView } from './LogView';
import { MetricsView } from './MetricsView';
import { JobGpuChart } from './GpuBars';
import { gpuApiFor } from '../gpu';
import { usePoll } from './usePoll';
import { filesLine, ranLine } from '../snapshot';
import { afterLine, waitingLine } from '../chains';
import { ChainView } from './ChainView';

export type JobTab = 'details' | 'logs' | 'metrics';

export interface IJobViewProps {
  model: HyperpodModel;
  job: IJob;
  initialTab: JobTab;
  cancelJob: (job: IJob) => Promise<IJob | null>;
  resubmitJob: (job: IJob, excludeNodes?: string[]) => void;
  /** The view fetched a newer record of the job (a poll, a cancel): the model's to know. */
  onJob?: (job: IJob) => void;
  /** The view shows a record the model pushed to it (only the tab's label to update). */
  onShown?: (job: IJob) => void;
  /** Whether the job's tab is shown: its polls stand by while it is not. */
  isVisible?: () => boolean;
}

/** How long the job has run, ticking every second while it runs. */
function Elapsed(props: {
  started: number;
  ended: number | null;
}): JSX.Element {
  const [, setNow] = React.useState(0);
  React.useEffect(() => {
    if (props.ended !== null) {
      return;
    }
    const id = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(id);
  }, [props.ended]);
  return (
    <span title="Run time">{jobDuration(props.started, props.ended)}</span>
  );
}

function Details(props: { job: IJob }): JSX.Element {
  const { job } = props;
  const spec = job.spec;
  const rows: [string, React.ReactNode][] = [
    ['State', <StateBadge key="s" state={job.state} />],
    ['Reason', job.state_reason],
    ['Waiting', job.held ? null : waitingLine(job)],
    ['After', afterLine(job.spec.after ?? [], Boolean(job.spec.after_any))],
    ['Job id', <code key="i">{job.id}</code>],
    [
      'Backend id',
      job.backend_id ? <code key="b">{job.backend_id}</code> : null
    ],
    ['Orchestrator', job.orchestrator],
    ['User', job.user],
    ['Created', formatDate(job.created)],
    ['Started', formatDate(job.started)],
    ['Ended', job.ended ? formatDate(job.ended) : null],
    ['Run time', job.started ? jobDuration(job.started, job.ended) : null],
    ['Exit code', job.exit_code !== null ? String(job.exit_code) : null],
    ['Resources', resources(job)],
    ['Template', spec.template ?? null],
    ['Command', <code key="c">{(spec.command ?? []).join(' ')}</code>],
    ['Working dir', spec.workdir || '(partition root)'],
    [
      'Ran',
      job.snapshot ? (
        <span key="r" title={`from ${job.snapshot.tree}`}>
          <code>{ranLine(job.snapshot)}</code> · {filesLine(job.snapshot)}
        </span>
      ) : null
    ],
    ['Queue', spec.queue ?? null],
    ['Image', spec.image ?? null]
  ];
  return (
    <div className="jp-hyperpod-Details">
      <dl className="jp-hyperpod-Facts jp-hyperpod-Facts-wide">
        {rows
          .filter(
            ([, value]) => value !== null && value !== undefined && value !== ''
          )
          .map(([key, value]) => (
            <React.Fragment key={key}>
              <dt>{key}</dt>
              <dd>{value}</dd>
            </React.Fragment>
          ))}
      </dl>
      {job.ranks.length > 0 && (
        <>
          <h3>Ranks</h3>
          <table className="jp-hyperpod-Table">
            <thead>
              <tr>
                <th>Rank</th>
                <th>Node</th>
                <th>State</th>
                <th>Exit</th>
                <th>Restarts</th>
              </tr>
            </thead>
            <tbody>
              {job.ranks.map(rank => (
                <tr key={rank.rank}>
                  <td>{rank.rank}</td>
                  <td>{rank.node ?? '—'}</td>
                  <td>{rank.state ?? '—'}</td>
                  <td>{rank.exit_code ?? '—'}</td>
                  <td>{rank.restarts}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      {job.events.length > 0 && (
        <>
          <h3>Events</h3>
          <ul className="jp-hyperpod-Events">
            {job.events.map((event, i) => (
              <li key={i}>{event}</li>
            ))}
          </ul>
        </>
      )}
      {spec.env && Object.keys(spec.env).length > 0 && (
        <>
          <h3>Environment</h3>
          <pre className="jp-hyperpod-Preview-text">
            {Object.entries(spec.env)
              .map(([k, v]) => `${k}=${v}`)
              .join('\n')}
          </pre>
        </>
      )}
    </div>
  );
}

export function JobView(props: IJobViewProps): JSX.Element {
  const { model } = props;
  useSignal(model.clusterChanged);
  useSignal(model.viewChanged);
  useTick(10000);
  const [job, setJob] = React.useState<IJob>(props.job);
  const [tab, setTab] = React.useState<JobTab>(props.initialTab);
  const [visited, setVisited] = React.useState<Set<JobTab>>(
    new Set([props.initialTab])
  );
  const [error, setError] = React.useState<ApiError | null>(null);
  const [rankRequest, setRankRequest] = React.useState<{
    rank: number;
    serial: number;
  } | null>(null);
  const running = !isFinished(job.state);
  const capabilities = model.cluster?.capabilities;

  const update = (next: IJob) => {
    setJob(next);
    props.onJob?.(next);
  };
  const load = async () => {
    try {
      update(await model.client.job(job.id));
      setError(null);
    } catch (reason) {
      setError(asApiError(reason));
      throw reason;
    }
  };
  React.useEffect(() => {
    const pushed = (_: unknown, next: IJob) => {
      if (next.id === job.id) {
        setJob(next); // from the model: handing it back would only echo
        props.onShown?.(next);
      }
    };
    model.jobChanged.connect(pushed);
    return () => void model.jobChanged.disconnect(pushed);
  }, [job.id]);
  const refresh = usePoll(
    load,
    model.settings.refreshInterval,
    running && !model.pushed,
    [job.id],
    props.isVisible
  );

  const select = (next: JobTab) => {
    setTab(next);
    setVisited(new Set([...visited, next]));
  };
  const tabs: { id: JobTab; title: string }[] = [
    { id: 'details', title: 'Details' },
    { id: 'logs', title: 'Logs' },
    { id: 'metrics', title: 'Metrics' }
  ];

  return (
    <div className="jp-hyperpod-JobView" data-job={job.name}>
      <header className="jp-hyperpod-JobHeader">
        <h2 className="jp-hyperpod-JobHeader-name">{job.name}</h2>
        <StateBadge state={job.state} title={job.state_reason ?? undefined} />
        <span className="jp-hyperpod-JobHeader-sub">
          {resources(job)}
          {job.started ? (
            <>
              {' · '}
              <Elapsed started={job.started} ended={job.ended} />
            </>
          ) : (
            ''
          )}
        </span>
        {job.state === 'RUNNING' && <JobProgress progress={job.progress} />}
        <span className="jp-hyperpod-Spacer" />
        {running && (capabilities?.cancel ?? true) && (
          <IconButton
            icon={stopIcon}
            title={`Cancel ${job.name}`}
            label="Cancel"
            onClick={() => {
              void props.cancelJob(job).then(next => next && update(next));
            }}
          />
        )}
        <IconButton
          icon={redoIcon}
          title="Resubmit (opens the form prefilled)"
          label="Resubmit"
          onClick={() => props.resubmitJob(job)}
        />
        <RefreshButton title="Refresh the job" onClick={refresh} />
      </header>
      <ErrorMessage error={error} stale onRetry={refresh} />
      {running && (
        <WatchdogBanner
          client={model.client}
          job={job}
          cancelJob={j => {
            void props.cancelJob(j).then(next => next && update(next));
          }}
          resubmitJob={props.resubmitJob}
        />
      )}
      {operatorVerdictLine(job) && (
        <div className="jp-hyperpod-Watchdog jp-mod-operator" role="status">
          <div className="jp-hyperpod-Watchdog-line">
            {operatorVerdictLine(job)}
          </div>
          {job.operator_verdict?.message && (
            <div className="jp-hyperpod-Watchdog-detail jp-mod-matched">
              {job.operator_verdict.message}
            </div>
          )}
        </div>
      )}
      <ViewBoundary view="Chain">
        <ChainView
          client={model.client}
          job={job}
          onResumed={jobs => {
            jobs.forEach(started => model.upsertJob(started));
          }}
        />
      </ViewBoundary>
      <ViewBoundary view="Diagnosis">
        <JobDiagnosis
          client={model.client}
          job={job}
          onShowRank={rank => {
            select('logs');
            setRankRequest({ rank, serial: (rankRequest?.serial ?? 0) + 1 });
          }}
        />
      </ViewBoundary>
      <div className="jp-hyperpod-Tabs" role="tablist" aria-label="Job views">
        {tabs.map(t => (
          <button
            key={t.id}
            role="tab"
            id={`jp-hyperpod-jobtab-${job.id}-${t.id}`}
            aria-selected={tab === t.id}
            className={`jp-hyperpod-Tab ${tab === t.id ? 'jp-mod-active' : ''}`}
            onClick={() => select(t.id)}
          >
            {t.title}
          </button>
        ))}
      </div>
      <div className="jp-hyperpod-JobBody">
        <div
          role="tabpanel"
          hidden={tab !== 'details'}
          className="jp-hyperpod-TabPanel"
        >
          <ViewBoundary view="Details">
            <Details job={job} />
          </ViewBoundary>
        </div>
        <div
          role="tabpanel"
          hidden={tab !== 'logs'}
          className="jp-hyperpod-TabPanel jp-hyperpod-TabPanel-logs"
        >
          {visited.has('logs') && (
            <ViewBoundary view="Logs">
              <LogView
                client={model.client}
                job={job}
                tailLines={model.settings.logTailLines}
                canFollow={capabilities?.follow_logs ?? true}
                perRank={capabilities?.per_rank_logs ?? true}
                initialRank={failedRank(job) ?? 0}
                rankRequest={rankRequest}
                onJobState={state => {
                  if (state !== job.state) {
                    refresh();
                  }
                }}
                onFactsBehind={refresh}
              />
            </ViewBoundary>
          )}
        </div>
        <div
          role="tabpanel"
          hidden={tab !== 'metrics'}
          className="jp-hyperpod-TabPanel"
        >
          <ViewBoundary view="Metrics">
            {visited.has('metrics') &&
              (capabilities && !capabilities.metrics ? (
                <div className="jp-hyperpod-Empty">
                  This cluster has no metrics store configured.
                </div>
              ) : (
                <MetricsView
                  client={model.client}
                  job={job}
                  jobId={job.id}
                  running={running}
                  refreshInterval={model.settings.refreshInterval}
                  isVisible={props.isVisible}
                />
              ))}
            {visited.has('metrics') && (
              <JobGpuChart
                api={gpuApiFor(model.client)}
                jobId={job.id}
                running={running}
                refreshInterval={model.settings.refreshInterval}
                isVisible={props.isVisible}
              />
            )}
          </ViewBoundary>
        </div>
      </div>
    </div>
  );
}
