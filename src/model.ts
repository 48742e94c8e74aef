/**
 * The panel's state: what the server said last, what failed, and the polls that keep it fresh.
 * Polls stop while the panel is hidden (standby) and back off while the cluster is unreachable.
 */

import { IDisposable } from '@lumino/disposable';
import { IPoll, Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { HyperpodClient } from './api';
import { ApiError } from './handler';
import {
  IClusterInfo,
  IJob,
  INode,
  isFinished,
  ITemplateInfo,
  JobState
} from './models';
import { DEFAULT_SETTINGS, IPanelSettings, ViewName } from './settings';

/** A request to open the Submit form prefilled (from "Submit as job" or "Resubmit"). */
export interface ISubmitRequest {
  template: string;
  params: Record<string, unknown>;
  /** Spec fields kept from the job being resubmitted. */
  overrides?: Record<string, unknown>;
  name?: string;
  /** Increases with each request so that the form applies it once. */
  serial: number;
}

export function asApiError(error: unknown): ApiError {
  if (error instanceof ApiError) {
    return error;
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ApiError(message, 0, 'client');
}

function frequency(seconds: number): IPoll.Frequency {
  const interval = seconds * 1000;
  return { interval, backoff: true, max: Math.max(interval * 6, 60000) };
}

export class HyperpodModel implements IDisposable {
  constructor(
    readonly client: HyperpodClient,
    settings: IPanelSettings = DEFAULT_SETTINGS
  ) {
    this._settings = settings;
    this._view = settings.defaultView;
    this._clusterPoll = new Poll({
      auto: false,
      factory: () => this._refreshCluster(),
      frequency: frequency(settings.refreshInterval),
      name: 'jupyter-hyperpod:cluster',
      standby: () => !this.isVisible() || 'when-hidden'
    });
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

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** A job seen unfinished in this session has ended (succeeded, failed or was cancelled). */
  get jobEnded(): ISignal<this, IJob> {
    return this._jobEnded;
  }

  /** A running job's watchdog says it stalled (once per stall: a new `stalled_since`). */
  get jobStalled(): ISignal<this, IJob> {
    return this._jobStalled;
  }

  get settings(): IPanelSettings {
    return this._settings;
  }

  set settings(settings: IPanelSettings) {
    const old = this._settings;
    this._settings = settings;
    if (old.refreshInterval !== settings.refreshInterval) {
      const f = frequency(settings.refreshInterval);
      this._clusterPoll.frequency = f;
      this._jobsPoll.frequency = f;
      this._watchPoll.frequency = frequency(
        Math.max(5, settings.refreshInterval)
      );
    }
    this._changed.emit();
  }

  get view(): ViewName {
    return this._view;
  }

  set view(view: ViewName) {
    if (view === this._view) {
      return;
    }
    this._view = view;
    this._changed.emit();
    if (view === 'jobs') {
      void this._jobsPoll.refresh();
    } else if (view === 'cluster') {
      void this._clusterPoll.refresh();
    }
  }

  get cluster(): IClusterInfo | null {
    return this._cluster;
  }

  /**
   * The cluster's description, fetched now when it was never read: the polls stand by while
   * the panel is closed, and a command of JupyterLab's file browser needs it at once.
   */
  async ensureCluster(): Promise<IClusterInfo> {
    if (!this._cluster) {
      this._cluster = await this.client.cluster();
      this._clusterError = null;
      this._changed.emit();
    }
    return this._cluster;
  }

  get clusterError(): ApiError | null {
    return this._clusterError;
  }

  get nodes(): INode[] | null {
    return this._nodes;
  }

  get nodesError(): ApiError | null {
    return this._nodesError;
  }

  get nodesUpdated(): Date | null {
    return this._nodesUpdated;
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
    this._changed.emit();
    void this._jobsPoll.refresh();
  }

  get jobsOffset(): number {
    return this._jobsOffset;
  }

  set jobsOffset(offset: number) {
    this._jobsOffset = Math.max(0, offset);
    this._changed.emit();
    void this._jobsPoll.refresh();
  }

  readonly jobsPageSize = 50;

  get templates(): ITemplateInfo[] | null {
    return this._templates;
  }

  get templatesError(): ApiError | null {
    return this._templatesError;
  }

  get submitRequest(): ISubmitRequest | null {
    return this._submitRequest;
  }

  /** Whether the Submit form is open in the main area (the sidebar then points to it). */
  get submitInMain(): boolean {
    return this._submitInMain;
  }

  set submitInMain(value: boolean) {
    if (value !== this._submitInMain) {
      this._submitInMain = value;
      this._changed.emit();
    }
  }

  /** Open the Submit view prefilled. */
  requestSubmit(request: Omit<ISubmitRequest, 'serial'>): void {
    this._submitRequest = { ...request, serial: ++this._serial };
    this._view = 'submit';
    this._changed.emit();
  }

  /** Start the polls (once the panel is attached). */
  start(): void {
    if (this._started) {
      return;
    }
    this._started = true;
    void this._clusterPoll.start();
    void this._jobsPoll.start();
    void this._watchPoll.start();
    void this.loadTemplates();
  }

  /** Refresh everything now (the refresh button, or the panel became visible). */
  async refresh(): Promise<void> {
    await Promise.all([
      this._clusterPoll.refresh(),
      this._jobsPoll.refresh(),
      this._templates ? Promise.resolve() : this.loadTemplates()
    ]);
  }

  /** The server now drives another cluster (after connect): forget the old one's data. */
  async useCluster(cluster: IClusterInfo): Promise<void> {
    this._cluster = cluster;
    this._clusterError = null;
    this._nodes = null;
    this._nodesError = null;
    this._nodesUpdated = null;
    this._jobs = null;
    this._jobsOffset = 0;
    this._changed.emit();
    await this.refresh();
  }

  refreshJobs(): Promise<void> {
    return this._jobsPoll.refresh();
  }

  async loadTemplates(): Promise<void> {
    try {
      this._templates = await this.client.templates();
      this._templatesError = null;
    } catch (error) {
      this._templatesError = asApiError(error);
    }
    this._changed.emit();
  }

  /** Put a job (just submitted or cancelled) into the list without waiting for a poll. */
  upsertJob(job: IJob): void {
    this._track([job]);
    const jobs = this._jobs ? [...this._jobs] : [];
    const index = jobs.findIndex(j => j.id === job.id);
    if (index >= 0) {
      jobs[index] = job;
    } else {
      jobs.unshift(job);
      this._jobsTotal += 1;
    }
    this._jobs = jobs;
    this._changed.emit();
  }

  /** Take a job out of the list (removed from the history). */
  removeJob(id: string): void {
    this._states.delete(id);
    if (this._jobs && this._jobs.some(j => j.id === id)) {
      this._jobs = this._jobs.filter(j => j.id !== id);
      this._jobsTotal = Math.max(0, this._jobsTotal - 1);
      this._changed.emit();
    }
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._clusterPoll.dispose();
    this._jobsPoll.dispose();
    this._watchPoll.dispose();
    Signal.clearData(this);
  }

  private async _refreshCluster(): Promise<void> {
    // The cluster facts rarely change: fetch them until they are known.
    if (!this._cluster || this._clusterError) {
      try {
        this._cluster = await this.client.cluster();
        this._clusterError = null;
      } catch (error) {
        this._clusterError = asApiError(error);
        this._changed.emit();
        throw error;
      }
    }
    if (this._view !== 'cluster' && this._nodes !== null) {
      this._changed.emit();
      return;
    }
    try {
      this._nodes = await this.client.nodes();
      this._nodesError = null;
      this._nodesUpdated = new Date();
    } catch (error) {
      this._nodesError = asApiError(error);
      throw error;
    } finally {
      this._changed.emit();
    }
  }

  private async _refreshJobs(): Promise<void> {
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
    } catch (error) {
      this._jobsError = asApiError(error);
      throw error;
    } finally {
      this._changed.emit();
    }
  }

  /** Remember each job's state; emit jobEnded for those seen unfinished that now are. */
  private _track(jobs: IJob[]): void {
    for (const job of jobs) {
      const before = this._states.get(job.id);
      this._states.set(job.id, job.state);
      if (
        before !== undefined &&
        !isFinished(before) &&
        isFinished(job.state)
      ) {
        this._jobEnded.emit(job);
      }
      const stalled =
        job.state === 'RUNNING' ? (job.watchdog?.stalled_since ?? null) : null;
      if (stalled !== null && this._stalls.get(job.id) !== stalled) {
        this._jobStalled.emit(job);
      }
      if (stalled === null) {
        this._stalls.delete(job.id);
      } else {
        this._stalls.set(job.id, stalled);
      }
    }
  }

  /** Check the jobs seen unfinished (one request each: usually a few). */
  private async _watchJobs(): Promise<void> {
    const running = Array.from(this._states.entries())
      .filter(([, state]) => !isFinished(state))
      .map(([id]) => id);
    if (running.length === 0) {
      return;
    }
    const found: IJob[] = [];
    for (const id of running.slice(0, 20)) {
      try {
        found.push(await this.client.job(id));
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) {
          this._states.delete(id);
        }
      }
    }
    const ended = found.filter(job => isFinished(job.state));
    this._track(found);
    if (ended.length > 0 && this._jobs) {
      // Show the new states in the list too.
      this._jobs = this._jobs.map(
        job => ended.find(e => e.id === job.id) ?? job
      );
      this._changed.emit();
    }
  }

  private _submitInMain = false;
  private _states = new Map<string, JobState>();
  private _jobEnded = new Signal<this, IJob>(this);
  private _stalls = new Map<string, number>();
  private _jobStalled = new Signal<this, IJob>(this);
  private _watchPoll: Poll;
  private _settings: IPanelSettings;
  private _view: ViewName;
  private _cluster: IClusterInfo | null = null;
  private _clusterError: ApiError | null = null;
  private _nodes: INode[] | null = null;
  private _nodesError: ApiError | null = null;
  private _nodesUpdated: Date | null = null;
  private _jobs: IJob[] | null = null;
  private _jobsTotal = 0;
  private _jobsError: ApiError | null = null;
  private _jobsState: JobState | '' = '';
  private _jobsOffset = 0;
  private _templates: ITemplateInfo[] | null = null;
  private _templatesError: ApiError | null = null;
  private _submitRequest: ISubmitRequest | null = null;
  private _serial = 0;
  private _started = false;
  private _isDisposed = false;
  private _clusterPoll: Poll;
  private _jobsPoll: Poll;
  private _changed = new Signal<this, void>(this);
}
