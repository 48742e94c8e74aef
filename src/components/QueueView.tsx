import { stopIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { formatAge } from '../format';
import { ApiError } from '../handler';
import { IJob, IQueueJob, IQueuePage } from '../models';
import {
  ErrorMessage,
  IconButton,
  Loading,
  RefreshButton,
  StateBadge
} from './common';

export type QueueClient = Pick<HyperpodClient, 'queue' | 'adopt' | 'queueLogs'>;

export interface IQueueViewProps {
  client: QueueClient;
  /** Open a job of this server (an adopted queue row) in the main area. */
  openJob: (job: IJob) => void;
  /** Cancel a job of this server, after the panel's confirmation dialog. */
  cancelJob: (job: IJob) => void;
  /** Seconds between refreshes while the view is shown. */
  refreshSeconds?: number;
  pageSize?: number;
  /** False while another tab is shown: no polling then (the cluster is asked on return). */
  active?: boolean;
}

const STATE_FILTERS: { value: string; label: string }[] = [
  { value: '', label: 'Pending and running' },
  { value: 'PENDING', label: 'Pending' },
  { value: 'RUNNING', label: 'Running' },
  { value: 'all', label: 'All states' }
];

function held(row: IQueueJob): string {
  const parts = [`${row.nodes} node${row.nodes === 1 ? '' : 's'}`];
  if (row.gpus > 0) {
    parts.push(`${row.gpus} GPU${row.gpus === 1 ? '' : 's'}`);
  }
  return parts.join(' · ');
}

function QueueRow(props: {
  row: IQueueJob;
  busy: boolean;
  onOpen: (row: IQueueJob) => void;
  onCancel: (row: IQueueJob) => void;
  onLogs: (row: IQueueJob) => void;
  log: string | null;
}): JSX.Element {
  const { row } = props;
  const priority =
    row.priority !== null ? `priority ${row.priority}` : row.priority_class;
  const finished = !['PENDING', 'RUNNING'].includes(row.state);
  return (
    <li
      className={`jp-hyperpod-QueueRow ${row.mine ? 'jp-mod-mine' : ''}`}
      data-queue-id={row.id}
      data-state={row.state}
    >
      <div className="jp-hyperpod-JobRow-line">
        <span className="jp-hyperpod-JobRow-name" title={row.id}>
          {row.name}
        </span>
        <span className="jp-hyperpod-QueueRow-user" title="Submitted by">
          {row.mine ? 'me' : row.user || 'unknown user'}
        </span>
      </div>
      <div className="jp-hyperpod-JobRow-line jp-hyperpod-JobRow-sub">
        <StateBadge state={row.state} title={row.reason ?? row.native_state} />
        {row.reason && (
          <span className="jp-hyperpod-QueueRow-reason">{row.reason}</span>
        )}
        <span>{held(row)}</span>
        {row.partition && (
          <span title="Partition or queue">{row.partition}</span>
        )}
        {priority && <span>{priority}</span>}
        {row.submitted !== null && (
          <span title={new Date(row.submitted * 1000).toString()}>
            {formatAge(row.submitted)}
          </span>
        )}
        <span className="jp-hyperpod-QueueRow-id">{row.id}</span>
      </div>
      {row.explanation && (
        <div
          className="jp-hyperpod-JobRow-line jp-hyperpod-JobRow-sub jp-hyperpod-JobRow-why"
          title={row.explanation}
        >
          {row.explanation}
        </div>
      )}
      <div className="jp-hyperpod-QueueRow-actions">
        {row.mine ? (
          <>
            <button
              type="button"
              className="jp-Button jp-mod-styled"
              disabled={props.busy}
              title={
                row.job_id
                  ? 'Open this job: details, logs and metrics'
                  : 'Submitted elsewhere: open it here (status, logs, metrics)'
              }
              onClick={() => props.onOpen(row)}
            >
              {row.job_id ? 'Open' : 'Adopt and open'}
            </button>
            {!finished && (
              <IconButton
                icon={stopIcon}
                title={`Cancel ${row.name} (asks first)`}
                className="jp-hyperpod-cancel"
                onClick={() => props.onCancel(row)}
              />
            )}
          </>
        ) : (
          <span
            className="jp-hyperpod-QueueRow-readonly"
            title="Others' jobs are read-only"
          >
            read-only
          </span>
        )}
        {row.logs_readable ? (
          <button
            type="button"
            className="jp-Button jp-mod-styled"
            onClick={() => props.onLogs(row)}
          >
            {props.log === null ? 'Log' : 'Hide log'}
          </button>
        ) : (
          <span
            className="jp-hyperpod-QueueRow-nolog"
            title={row.logs_reason ?? ''}
          >
            log not readable
          </span>
        )}
      </div>
      {props.log !== null && (
        <pre
          className="jp-hyperpod-QueueRow-log"
          aria-label={`Log of ${row.name}`}
        >
          {props.log}
        </pre>
      )}
    </li>
  );
}

/**
 * The cluster's queue: every job it reports (all users), filtered and paged on the server. My
 * jobs submitted elsewhere open here (adopted) and cancel after a confirmation; others' jobs are
 * read-only, their logs shown only where the cluster lets this user read them.
 */
export function QueueView(props: IQueueViewProps): JSX.Element {
  const pageSize = props.pageSize ?? 50;
  const [mine, setMine] = React.useState(false);
  const [state, setState] = React.useState('');
  const [queue, setQueue] = React.useState('');
  const [offset, setOffset] = React.useState(0);
  const [page, setPage] = React.useState<IQueuePage | null>(null);
  const [error, setErrorState] = React.useState<ApiError | string | null>(null);
  const setError = (reason: unknown) =>
    setErrorState(
      reason === null ||
        reason instanceof ApiError ||
        typeof reason === 'string'
        ? reason
        : String(reason)
    );
  const [busy, setBusy] = React.useState(false);
  const [logs, setLogs] = React.useState<Record<string, string>>({});
  const request = React.useRef(0);

  const load = React.useCallback(
    async (refresh = false) => {
      const mark = ++request.current;
      try {
        const next = await props.client.queue({
          mine,
          state,
          queue: queue || undefined,
          offset,
          limit: pageSize,
          refresh
        });
        if (mark === request.current) {
          setPage(next);
          setError(null);
        }
      } catch (reason) {
        if (mark === request.current) {
          setError(reason);
        }
      }
    },
    [props.client, mine, state, queue, offset, pageSize]
  );

  const active = props.active ?? true;
  React.useEffect(() => {
    if (!active) {
      return;
    }
    void load();
    const every = (props.refreshSeconds ?? 5) * 1000;
    const timer = setInterval(() => {
      if (typeof document === 'undefined' || !document.hidden) {
        void load();
      }
    }, every);
    return () => clearInterval(timer);
  }, [load, props.refreshSeconds, active]);

  const adopted = async (row: IQueueJob): Promise<IJob | null> => {
    setBusy(true);
    try {
      return await props.client.adopt(row.id);
    } catch (reason) {
      setError(reason);
      return null;
    } finally {
      setBusy(false);
    }
  };

  const open = async (row: IQueueJob) => {
    const job = await adopted(row);
    if (job) {
      props.openJob(job);
      void load();
    }
  };

  const cancel = async (row: IQueueJob) => {
    const job = await adopted(row);
    if (job) {
      props.cancelJob(job);
    }
  };

  const toggleLog = async (row: IQueueJob) => {
    if (row.id in logs) {
      const rest = { ...logs };
      delete rest[row.id];
      setLogs(rest);
      return;
    }
    try {
      const found = await props.client.queueLogs(row.id);
      setLogs({ ...logs, [row.id]: found.text || '(empty)' });
    } catch (reason) {
      setError(reason);
    }
  };

  const counts = page
    ? Object.entries(page.counts)
        .map(([name, count]) => `${count} ${name.toLowerCase()}`)
        .join(', ')
    : '';
  return (
    <div className="jp-hyperpod-View jp-hyperpod-QueueView">
      <div className="jp-hyperpod-Toolbar">
        <label>
          <input
            type="checkbox"
            checked={mine}
            onChange={event => {
              setMine(event.target.checked);
              setOffset(0);
            }}
          />
          Mine
        </label>
        <select
          className="jp-mod-styled"
          aria-label="State"
          value={state}
          onChange={event => {
            setState(event.target.value);
            setOffset(0);
          }}
        >
          {STATE_FILTERS.map(option => (
            <option key={option.value} value={option.value}>
              {option.label}
            </option>
          ))}
        </select>
        <select
          className="jp-mod-styled"
          aria-label="Queue"
          value={queue}
          onChange={event => {
            setQueue(event.target.value);
            setOffset(0);
          }}
        >
          <option value="">All queues</option>
          {(page?.partitions ?? []).map(name => (
            <option key={name} value={name}>
              {name}
            </option>
          ))}
        </select>
        <RefreshButton onClick={() => void load(true)} />
      </div>
      {error !== null && (
        <ErrorMessage error={error} onRetry={() => void load(true)} />
      )}
      {page === null && error === null && <Loading what="the queue" />}
      {page !== null && (
        <>
          <div className="jp-hyperpod-QueueView-summary">
            {page.total === 0
              ? `No job matches (${counts || 'the queue is empty'})`
              : `${page.offset + 1}–${page.offset + page.jobs.length} of ${page.total}` +
                (counts ? ` · ${counts}` : '')}
          </div>
          <ul className="jp-hyperpod-QueueList">
            {page.jobs.map(row => (
              <QueueRow
                key={row.id}
                row={row}
                busy={busy}
                onOpen={row => void open(row)}
                onCancel={row => void cancel(row)}
                onLogs={row => void toggleLog(row)}
                log={logs[row.id] ?? null}
              />
            ))}
          </ul>
          {page.total > pageSize && (
            <div className="jp-hyperpod-Pager">
              <button
                type="button"
                className="jp-Button jp-mod-styled"
                disabled={offset === 0}
                onClick={() => setOffset(Math.max(0, offset - pageSize))}
              >
                Previous
              </button>
              <button
                type="button"
                className="jp-Button jp-mod-styled"
                disabled={offset + pageSize >= page.total}
                onClick={() => setOffset(offset + pageSize)}
              >
                Next
              </button>
            </div>
          )}
        </>
      )}
    </div>
  );
}
