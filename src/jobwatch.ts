/**
 * Which jobs this session saw unfinished, and the signals a change of theirs raises: `ended`
 * (so the user hears when one ends, even with the panel closed) and `stalled` (once per stall,
 * a new `stalled_since`). Fed by every list, pushed change and check of a job.
 */

import { ISignal, Signal } from '@lumino/signaling';

import { HyperpodClient } from './api';
import { ApiError } from './handler';
import { IJob, isFinished, JobState } from './models';

export class JobWatch {
  constructor(readonly client: HyperpodClient) {}

  get ended(): ISignal<this, IJob> {
    return this._ended;
  }

  get stalled(): ISignal<this, IJob> {
    return this._stalled;
  }

  /** Some unfinished job is known (the watch poll has something to check). */
  get watching(): string[] {
    return Array.from(this._states.entries())
      .filter(([, state]) => !isFinished(state))
      .map(([id]) => id);
  }

  forget(id: string): void {
    this._states.delete(id);
    this._stalls.delete(id);
  }

  /** Remember each job's state; emit `ended` for those seen unfinished that now are. */
  track(jobs: IJob[]): void {
    for (const job of jobs) {
      const before = this._states.get(job.id);
      this._states.set(job.id, job.state);
      if (
        before !== undefined &&
        !isFinished(before) &&
        isFinished(job.state)
      ) {
        this._ended.emit(job);
      }
      const stalled =
        job.state === 'RUNNING' ? (job.watchdog?.stalled_since ?? null) : null;
      if (stalled !== null && this._stalls.get(job.id) !== stalled) {
        this._stalled.emit(job);
      }
      if (stalled === null) {
        this._stalls.delete(job.id);
      } else {
        this._stalls.set(job.id, stalled);
      }
    }
  }

  /** Check the jobs seen unfinished (one request each: usually a few); the ended ones. */
  async check(): Promise<IJob[]> {
    const found: IJob[] = [];
    for (const id of this.watching.slice(0, 20)) {
      try {
        found.push(await this.client.job(id));
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) {
          this._states.delete(id);
        }
      }
    }
    this.track(found);
    return found.filter(job => isFinished(job.state));
  }

  dispose(): void {
    Signal.clearData(this);
  }

  private _states = new Map<string, JobState>();
  private _stalls = new Map<string, number>();
  private _ended = new Signal<this, IJob>(this);
  private _stalled = new Signal<this, IJob>(this);
}
