/**
 * Chains (#24 item 4), in words for the panel: which jobs a new job may run after, what a held
 * job waits for, and a chain's links. The server decides (core/chains.py); these only show it.
 */
import { IJob, IJobChain } from './models';

/** The jobs the Submit form offers under "Run after": unfinished or succeeded, newest first. */
export function runAfterChoices(jobs: IJob[] | null, limit = 30): IJob[] {
  return (jobs ?? [])
    .filter(job => job.state !== 'FAILED' && job.state !== 'CANCELLED')
    .slice(0, limit);
}

/** "prepare (prepare-1a2b3c) · RUNNING": one choice of "Run after". */
export function choiceLabel(job: IJob): string {
  return `${job.name} (${job.id}) · ${job.state}`;
}

/** Why a job waits for others: the server's hold ("waiting for prepare-1a2b3c (prepare)"),
 * else, while the cluster holds it (Slurm's Dependency), the jobs it names; null otherwise. */
export function waitingLine(job: IJob): string | null {
  if (job.held) {
    return job.held;
  }
  const after = job.spec.after ?? [];
  if (job.state === 'PENDING' && after.length > 0) {
    return `waiting for ${after.join(', ')} (held by the cluster)`;
  }
  return null;
}

/** "after prepare-1a2b3c, train-4d5e6f (any end)": what a link waits for, or ''. */
export function afterLine(after: string[], afterAny: boolean): string {
  if (after.length === 0) {
    return '';
  }
  return `after ${after.join(', ')}${afterAny ? ' (any end)' : ''}`;
}

/** Whether the chain view offers "Resume from here" on this job. */
export function canResume(chain: IJobChain | null, job: IJob): boolean {
  return (
    chain !== null &&
    chain.links.length > 1 &&
    (job.state === 'FAILED' || job.state === 'CANCELLED') &&
    chain.failed === job.id
  );
}
