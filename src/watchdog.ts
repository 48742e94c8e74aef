/**
 * The watchdog's words in the panel: what the Jobs list and the job view say of a running job
 * that is stalled or has stragglers (the server's `Job.watchdog`), and the stack dump laid out
 * side by side.
 */
import {
  IJob,
  IRankClock,
  IStackDump,
  IStackFrame,
  IStraggler
} from './models';

function where(clock: IRankClock | IStraggler): string {
  return `rank ${clock.rank}` + (clock.node ? ` on ${clock.node}` : '');
}

function clockTime(seconds: number): string {
  return new Date(seconds * 1000).toLocaleTimeString();
}

/** Whether the job is running and stalled now. */
export function isStalled(job: IJob): boolean {
  return job.state === 'RUNNING' && !!job.watchdog?.stalled_since;
}

/** "stalled since 10:42:07 (stopped first: rank 1 on node-a at step 4)", or the stragglers. */
export function watchdogLine(job: IJob): string | null {
  const watchdog = job.watchdog;
  if (job.state !== 'RUNNING' || !watchdog) {
    return null;
  }
  if (watchdog.stalled_since) {
    const first = watchdog.stopped_first
      .map(c => where(c) + (c.step !== null ? ` at step ${c.step}` : ''))
      .join(', ');
    return (
      `stalled since ${clockTime(watchdog.stalled_since)}` +
      (first ? ` (stopped first: ${first})` : '')
    );
  }
  if (watchdog.stragglers.length > 0) {
    return watchdog.stragglers
      .map(
        s =>
          `straggler: ${where(s)}, ${s.rate.toPrecision(2)} steps/s vs ${s.others_rate.toPrecision(2)}`
      )
      .join('; ');
  }
  return null;
}

/**
 * The cluster operator's own verdict, as the server's backend read it (`Job.operator_verdict`):
 * "HyperPod: HANGING (rule r) at 10:02:07, restarting the job (restart 1) [rank 1, on i-0abc]".
 * Shown in any state: the operator may have failed the job.
 */
export function operatorVerdictLine(job: IJob): string | null {
  const verdict = job.operator_verdict;
  if (!verdict) {
    return null;
  }
  const at = verdict.at !== null ? ` at ${clockTime(verdict.at)}` : '';
  const where = [
    ...verdict.ranks.map(rank => `rank ${rank}`),
    ...verdict.nodes.map(node => `on ${node}`)
  ].join(', ');
  return (
    `HyperPod: ${verdict.state} (rule ${verdict.rule})${at}, ${verdict.action}` +
    (where ? ` [${where}]` : '')
  );
}

/** The nodes of the ranks that stopped first (the suspects), each once. */
export function suspectNodes(job: IJob): string[] {
  const nodes = (job.watchdog?.stopped_first ?? [])
    .map(c => c.node)
    .filter((n): n is string => !!n);
  return [...new Set(nodes)];
}

/** The notification when a job stalls. */
export function stallNotice(job: IJob): string {
  return `Job ${job.name} stalled: ${watchdogLine(job) ?? 'no new step'}.`;
}

/** The ranks' main threads side by side, outermost frame first: rows[depth][rank]. */
export function stackRows(dump: IStackDump): (IStackFrame | null)[][] {
  const columns = dump.ranks.map(r =>
    r.threads.length > 0 ? [...r.threads[0].frames].reverse() : []
  );
  const depth = Math.max(0, ...columns.map(c => c.length));
  const rows: (IStackFrame | null)[][] = [];
  for (let i = 0; i < depth; i++) {
    rows.push(columns.map(c => c[i] ?? null));
  }
  return rows;
}
