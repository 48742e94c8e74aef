/**
 * Why a job is where it is, from what the backends report (the job's reason, its ranks' exit
 * codes and states, the orchestrator's events): which rank failed first, why a job waits.
 */

import { IJob } from './models';

/**
 * The rank the job failed on first, as the server decided it from the ranks' faults, exit codes
 * and end times (`Job.failed_rank`, jupyter_hyperpod/core/blame.py). Null when the job did not
 * fail or no rank is to blame.
 */
export function failedRank(job: IJob): number | null {
  return job.failed_rank ?? null;
}

/** A sentence on why the job is not running yet, or null. */
export function waitingReason(job: IJob): string | null {
  if (job.state !== 'PENDING') {
    return null;
  }
  if (job.state_reason) {
    return job.state_reason;
  }
  return job.events.length > 0
    ? job.events[job.events.length - 1]
    : 'Waiting for the cluster to start it.';
}

/** The sentence shown when a job has ended, with its reason and exit code where known. */
export function endedMessage(job: IJob): string {
  const parts: string[] = [];
  if (job.state_reason) {
    parts.push(job.state_reason);
  }
  if (
    job.exit_code !== null &&
    job.exit_code !== 0 &&
    !(job.state_reason ?? '').includes(`code ${job.exit_code}`)
  ) {
    parts.push(`exit code ${job.exit_code}`);
  }
  return `The job ended: ${job.state}${parts.length ? ` (${parts.join(', ')})` : ''}.`;
}

/** Restarts of the job's ranks so far (auto-resume, HyperPod restarts), as a sentence or null. */
export function restartSummary(job: IJob): string | null {
  const restarted = job.ranks.filter(r => r.restarts > 0);
  if (restarted.length === 0) {
    return null;
  }
  const most = Math.max(...restarted.map(r => r.restarts));
  return `Restarted ${most} time${most === 1 ? '' : 's'} (${restarted
    .map(r => `rank ${r.rank}: ${r.restarts}`)
    .join(', ')}).`;
}

const RESTART_TYPES: Record<string, string> = {
  JLR: 'job-level restart',
  PLR: 'process-level restart'
};

/**
 * The job's restarts as the orchestrator recorded their faults (HyperPod's faulty pod/rank
 * fields), one line per restart, then the fault the job failed on; empty when none is known.
 */
export function restartHistory(job: IJob): string[] {
  const byRestart = new Map<
    number | null,
    { type: string | null; parts: string[] }
  >();
  for (const info of job.ranks) {
    for (const fault of info.faults ?? []) {
      const entry = byRestart.get(fault.restart) ?? {
        type: fault.restart_type,
        parts: []
      };
      const where = [fault.pod, fault.node ? `on ${fault.node}` : null]
        .filter(Boolean)
        .join(' ');
      entry.parts.push(`rank ${info.rank}${where ? ` (${where})` : ''}`);
      byRestart.set(fault.restart, entry);
    }
  }
  const restarts = [...byRestart.keys()]
    .filter((n): n is number => n !== null)
    .sort((a, b) => a - b);
  const lines = restarts.map(n => {
    const entry = byRestart.get(n)!;
    const kind = entry.type
      ? ` (${RESTART_TYPES[entry.type] ?? entry.type})`
      : '';
    return `Restart ${n}${kind}: ${entry.parts.join(', ')} faulty.`;
  });
  const final = byRestart.get(null);
  if (final) {
    lines.push(`Failed on: ${final.parts.join(', ')} faulty.`);
  }
  return lines;
}

/** The notification for a job that ended: its words and kind. */
export function jobEndNotice(job: IJob): {
  message: string;
  type: 'success' | 'error' | 'info';
} {
  if (job.state === 'SUCCEEDED') {
    return { message: `Job ${job.name} succeeded.`, type: 'success' };
  }
  if (job.state === 'CANCELLED') {
    return { message: `Job ${job.name} was cancelled.`, type: 'info' };
  }
  const rank = failedRank(job);
  const why =
    job.state_reason ??
    (job.exit_code !== null ? `exit code ${job.exit_code}` : '');
  return {
    message:
      `Job ${job.name} failed` +
      (why ? `: ${why}` : rank !== null ? ` (rank ${rank})` : '') +
      '.',
    type: 'error'
  };
}
