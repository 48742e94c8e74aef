/**
 * What the log view's rank picker says and selects, from the server's per-rank facts only
 * (`IJob.ranks[i].state`, `IJob.failed_rank`): nothing here guesses a rank's state.
 */

import { IJob, isFinished } from './models';

/** A rank's state next to its number in the picker: always the server's, when it has one. */
export function rankLabel(job: IJob, rank: number): string {
  const info = job.ranks[rank];
  const state = info?.state;
  if (!state) {
    return '';
  }
  if (state === 'PENDING' && isFinished(job.state)) {
    return ' · never started';
  }
  const first = job.state === 'FAILED' && job.failed_rank === rank;
  return ` · ${state}${first ? ' (failed first)' : ''}`;
}

/**
 * The rank a log view moves to when the job it shows changes: the failed rank, once the job
 * has failed (`previous` had not, or named another rank); null to stay where it is.
 */
export function rankOnChange(previous: IJob | null, next: IJob): number | null {
  if (next.state !== 'FAILED') {
    return null;
  }
  const failed = next.failed_rank ?? null;
  if (failed === null) {
    return null;
  }
  if (
    previous !== null &&
    previous.state === 'FAILED' &&
    (previous.failed_rank ?? null) === failed
  ) {
    return null;
  }
  return failed;
}

/**
 * Whether text printed by `rank` says the job's facts are behind: the server last said the
 * rank had not started (the view then asks the server again rather than guessing).
 */
export function factsBehind(job: IJob, rank: number): boolean {
  const state = job.ranks[rank]?.state;
  return state === 'PENDING' || state === 'STARTING';
}

/** The search box's count: "3 of 12", "No match", or "" before a search. */
export function matchCount(
  result: { resultIndex: number; resultCount: number } | null
): string {
  if (result === null) {
    return '';
  }
  if (result.resultCount <= 0) {
    return 'No match';
  }
  // The addon counts at most 1,000 matches and gives index -1 past them.
  const more = result.resultCount >= 1000 ? '+' : '';
  const index = result.resultIndex >= 0 ? `${result.resultIndex + 1} of ` : '';
  return `${index}${result.resultCount.toLocaleString('en-US')}${more}`;
}
