/**
 * The jobs aspect of the panel's model (`HyperpodModel` extends it): the Jobs list and its poll,
 * the watch of unfinished jobs (jobEnded, jobStalled) and the pushed changes of the job feed
 * (`src/feed.ts`): a pushed job updates its row and its open views at once, and while the feed
 * is up the jobs are polled PUSHED_SLOWER times less often (down: as before).
 */

import { IPoll, Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { HyperpodClient } from './api';
import { JobFeed } from './feed';
import { ApiError } from './handler';
import { JobWatch } from './jobwatch';
import { IJob, ISweepSummary, JobState } from './models';
import { IPanelSettings } from './settings';

export function asApiError(error: unknown): ApiError {
  if (error instanceof ApiError) {
    return error;
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ApiError(message, 0, 'client');
}

/** Polls while the feed pushes changes: this many times slower (a safety net). */
const PUSHED_SLOWER = 6;

export function frequency(seconds: number, pushed = false): IPoll.Frequency {
  const interval = seconds * 1000 * (pushed ? PUSHED_SLOWER : 1);
  return { interval, backoff: true, max: Math.max(interval * 6, 60000) };
}

export abstract class JobsModel {
  constructor(
    readonly client: HyperpodClient,
    settings: IPanelSettings
  ) {
    this._settings = settings;
    this._watch = new JobWatch(client);
    // While jobs run, their states are checked even with the panel closed, so that the user
    // hears when one ends (see jobEnded); nothing is fetched when none runs.
    this._watchPoll = new Poll({
      auto: false,
      factory: () => this._watchJobs(),
      frequency: frequency(Math.max(5, settings.refreshInterval)),
      name: 'jupyter-hyperpod:watch',
      standby: 'never'
    });
    this._jobsPoll = new Poll({
      auto: false,
      factory: () => this._refreshJobs(),
      frequency: frequency(settings.refreshInterval),
      name: 'jupyter-hyperpod:jobs',
      standby: () => !this.isVisible() || 'when-hidden'
    });
  }

  /** Set by the panel: polls stand by while this says false. */
  isVisible: () => boolean = () => true;

  /** The Jobs list (its rows, total, filter, page or error) changed. */
  get jobsChanged(): ISignal<this, void> {
    return this._jobsChanged;
  }

  /** One job's record changed (pushed, polled, submitted or cancelled): its open views. */
  get jobChanged(): ISignal<this, IJob> {
    return this._jobChanged;
  }

  /** Job changes are pushed now (the feed is up): views need not poll. */
  get pushed(): boolean {
    return this._feed?.connected ?? false;
  }

  /** A job seen unfinished in this session has ended (succeeded, failed or was cancelled). */
  get jobEnded(): ISignal<JobWatch, IJob> {
    return this._watch.ended;
  }

  /** A running job's watchdog says it stalled (once per stall: a new `stalled_since`). */
  get jobStalled(): ISignal<JobWatch, IJob> {
    return this._watch.stalled;
  }

  /** The jobs' polls: as set while the feed is down, PUSHED_SLOWER times slower while up. */
  protected _setJobPolls(): void {
    const seconds = this._settings.refreshInterval;
    this._jobsPoll.frequency = frequency(seconds, this.pushed);
    this._watchPoll.frequency = frequency(Math.max(5, seconds), this.pushed);
  }

  get jobs(): IJob[] | null {
    return this._jobs;
  }

  get jobsTotal(): number {
    return this._jobsTotal;
  }

  get jobsError(): ApiError | null {
    return this._jobsError;
  }

  get jobsState(): JobState | '' {
    return this._jobsState;
  }

  set jobsState(state: JobState | '') {
    if (state === this._jobsState) {
      return;
    }
    this._jobsState = state;
    this._jobsOffset = 0;
    this._jobsChanged.emit();
    void this._jobsPoll.refresh();
  }

  get jobsOffset(): number {
    return this._jobsOffset;
  }

  set jobsOffset(offset: number) {
    this._jobsOffset = Math.max(0, offset);
    this._jobsChanged.emit();
    void this._jobsPoll.refresh();
  }

  readonly jobsPageSize = 50;

  protected _startFeed(): void {
    const client = this.client;
    if (typeof client.feedUrl !== 'function') {
      return; // a client without the feed (tests' doubles): polling alone
    }
    this._feed = new JobFeed({
      url: (since, epoch) => client.feedUrl(since, epoch),
      onJob: job => this._pushed(job),
      onRemoved: id => this.removeJob(id),
      onResync: () => void this._jobsPoll.refresh(),
      onConnected: () => this._setJobPolls()
    });
    this._feed.start();
  }

  /** A pushed change: the job's views, its row when the list shows it, the watch. */
  protected _pushed(job: IJob): void {
    const rows = this._jobs;
    const index = rows ? rows.findIndex(j => j.id === job.id) : -1;
    const filter = this._jobsState;
    if (rows && index >= 0) {
      this._jobs = rows.map(j => (j.id === job.id ? job : j));
      this._jobsChanged.emit();
    } else if (
      rows &&
      this._jobsOffset === 0 &&
      (!filter || filter === job.state)
    ) {
      this._jobs = [job, ...rows].slice(0, this.jobsPageSize);
      this._jobsTotal += 1;
      this._jobsChanged.emit();
    }
    this._watch.track([job]);
    this._jobChanged.emit(job);
  }

  refreshJobs(): Promise<void> {
    return this._jobsPoll.refresh();
  }

  /** Put a job (just submitted or cancelled) into the list without waiting for a poll. */
  upsertJob(job: IJob): void {
    const jobs = this._jobs ? [...this._jobs] : [];
    const index = jobs.findIndex(j => j.id === job.id);
    if (index >= 0 && jobs[index] === job) {
      return; // already known: a view handing back the change it was sent
    }
    if (index >= 0) {
      jobs[index] = job;
    } else {
      jobs.unshift(job);
      this._jobsTotal += 1;
    }
    this._jobs = jobs;
    this._watch.track([job]);
    this._jobChanged.emit(job);
    this._jobsChanged.emit();
  }

  /** Take a job out of the list (removed from the history). */
  removeJob(id: string): void {
    this._watch.forget(id);
    if (this._jobs && this._jobs.some(j => j.id === id)) {
      this._jobs = this._jobs.filter(j => j.id !== id);
      this._jobsTotal = Math.max(0, this._jobsTotal - 1);
      this._jobsChanged.emit();
    }
  }

  protected async _refreshJobs(): Promise<void> {
    try {
      const list = await this.client.jobs({
        state: this._jobsState,
        limit: this.jobsPageSize,
        offset: this._jobsOffset
      });
      this._track(list.jobs);
      this._jobs = list.jobs;
      this._jobsTotal = list.total;
      this._jobsError = null;
      await this._refreshSweeps(list.jobs);
    } catch (error) {
      this._jobsError = asApiError(error);
      throw error;
    } finally {
      this._jobsChanged.emit();
    }
  }

  /** The group rows of the sweeps whose members the list shows (#24 item 3). */
  get sweeps(): ISweepSummary[] {
    return this._sweeps;
  }

  protected async _refreshSweeps(jobs: IJob[]): Promise<void> {
    if (
      typeof this.client.sweeps !== 'function' ||
      !jobs.some(job => job.spec.sweep)
    ) {
      this._sweeps = [];
      return;
    }
    try {
      this._sweeps = (await this.client.sweeps()).sweeps;
    } catch {
      // the jobs still show; the group rows come back with the next poll
    }
  }

  protected _track(jobs: IJob[]): void {
    this._watch.track(jobs);
  }

  /** Check the jobs seen unfinished; show the ended ones' new states in the list too. */
  protected async _watchJobs(): Promise<void> {
    const ended = await this._watch.check();
    if (ended.length > 0 && this._jobs) {
      this._jobs = this._jobs.map(
        job => ended.find(e => e.id === job.id) ?? job
      );
      this._jobsChanged.emit();
    }
    ended.forEach(job => this._jobChanged.emit(job));
  }

  protected _watch: JobWatch;
  protected _feed: JobFeed | null = null;
  protected _watchPoll: Poll;
  protected _settings: IPanelSettings;
  protected _jobs: IJob[] | null = null;
  protected _jobsTotal = 0;
  protected _sweeps: ISweepSummary[] = [];
  protected _jobsError: ApiError | null = null;
  protected _jobsState: JobState | '' = '';
  protected _jobsOffset = 0;
  protected _jobsPoll: Poll;
  protected _jobsChanged = new Signal<this, void>(this);
  protected _jobChanged = new Signal<this, IJob>(this);
}
