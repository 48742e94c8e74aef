import * as React from 'react';

import { HyperpodClient } from '../api';
import {
  failedRank,
  restartHistory,
  restartSummary,
  waitingReason
} from '../diagnosis';
import { IJob } from '../models';

/** Lines of the failed rank shown above the log. */
export const FAILURE_LINES = 15;

/**
 * Above a job's tabs: why it failed (the rank that failed first, the reason, that rank's last
 * lines) or why it waits (the scheduler's reason, the latest events); restarts so far.
 */
export function JobDiagnosis(props: {
  client: HyperpodClient;
  job: IJob;
  onShowRank?: (rank: number) => void;
}): JSX.Element | null {
  const { client, job } = props;
  const rank = failedRank(job);
  const waiting = waitingReason(job);
  const restarts = restartSummary(job);
  const history = restartHistory(job);
  const historyList =
    history.length > 0 ? (
      <ul
        className="jp-hyperpod-Diagnosis-history"
        aria-label="Restart history"
      >
        {history.map((line, i) => (
          <li key={i}>{line}</li>
        ))}
      </ul>
    ) : null;
  const [lines, setLines] = React.useState<string | null>(null);

  React.useEffect(() => {
    setLines(null);
    if (job.state !== 'FAILED') {
      return;
    }
    let cancelled = false;
    client
      .logs(job.id, rank ?? 0, FAILURE_LINES)
      .then(snapshot => {
        if (!cancelled) {
          setLines(snapshot.text.replace(/\s+$/, ''));
        }
      })
      .catch(() => {
        if (!cancelled) {
          setLines('');
        }
      });
    return () => {
      cancelled = true;
    };
  }, [job.id, job.state, rank]);

  if (job.state === 'FAILED') {
    const rankInfo = rank !== null ? job.ranks[rank] : undefined;
    const where = rankInfo?.node ? ` on ${rankInfo.node}` : '';
    return (
      <section
        className="jp-hyperpod-Diagnosis jp-mod-failed"
        aria-label="Why the job failed"
      >
        <div className="jp-hyperpod-Diagnosis-title">
          {rank !== null
            ? `Rank ${rank} failed first${where}`
            : 'The job failed'}
          {job.exit_code !== null && ` · exit code ${job.exit_code}`}
          {rank !== null && props.onShowRank && (
            <button
              type="button"
              className="jp-Button jp-mod-minimal jp-hyperpod-Message-retry"
              onClick={() => props.onShowRank?.(rank)}
            >
              Show its log
            </button>
          )}
        </div>
        <div className="jp-hyperpod-Diagnosis-reason">
          {job.state_reason ?? 'The orchestrator gave no reason.'}
        </div>
        {restarts && (
          <div className="jp-hyperpod-Diagnosis-restarts">{restarts}</div>
        )}
        {historyList}
        {lines ? (
          <pre
            className="jp-hyperpod-Diagnosis-lines"
            aria-label={`Last lines of rank ${rank ?? 0}`}
            tabIndex={0}
          >
            {lines}
          </pre>
        ) : lines === '' ? (
          <div className="jp-hyperpod-Diagnosis-empty">
            {`Rank ${rank ?? 0} wrote nothing: the job may have failed before it started.`}
          </div>
        ) : null}
      </section>
    );
  }
  if (waiting) {
    const events = job.events.slice(-3);
    return (
      <section
        className="jp-hyperpod-Diagnosis jp-mod-pending"
        aria-label="Why the job is waiting"
      >
        <div className="jp-hyperpod-Diagnosis-title">Waiting: {waiting}</div>
        {events.length > 0 && events[events.length - 1] !== waiting && (
          <ul className="jp-hyperpod-Events">
            {events.map((event, i) => (
              <li key={i}>{event}</li>
            ))}
          </ul>
        )}
      </section>
    );
  }
  if (restarts || historyList) {
    return (
      <section className="jp-hyperpod-Diagnosis" aria-label="Restarts">
        {restarts && (
          <div className="jp-hyperpod-Diagnosis-restarts">{restarts}</div>
        )}
        {historyList}
      </section>
    );
  }
  return null;
}
