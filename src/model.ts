/**
 * The panel's state: what the server said last, what failed, and the polls that keep it fresh.
 * Polls stop while the panel is hidden (standby) and back off while the cluster is unreachable.
 * Job changes are pushed (`src/feed.ts`): while the feed is up the jobs are polled only rarely.
 * One signal per aspect (cluster, jobs, templates, view): a view re-renders for what it shows.
 */

import { IDisposable } from '@lumino/disposable';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { HyperpodClient } from './api';
import { ApiError } from './handler';
import { asApiError, frequency, JobsModel } from './jobsmodel';
import { IClusterInfo, INode, ITemplateInfo } from './models';
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

export { asApiError };

export class HyperpodModel extends JobsModel implements IDisposable {
  constructor(
    client: HyperpodClient,
    settings: IPanelSettings = DEFAULT_SETTINGS
  ) {
    super(client, settings);
    this._view = settings.defaultView;
    this._clusterPoll = new Poll({
      auto: false,
      factory: () => this._refreshCluster(),
      frequency: frequency(settings.refreshInterval),
      name: 'jupyter-hyperpod:cluster',
      standby: () => !this.isVisible() || 'when-hidden'
    });
  }

  /** The cluster, its nodes or their errors changed. */
  get clusterChanged(): ISignal<this, void> {
    return this._clusterChanged;
  }

  get templatesChanged(): ISignal<this, void> {
    return this._templatesChanged;
  }

  /** The view shown, the settings, the Submit request or where the form is changed. */
  get viewChanged(): ISignal<this, void> {
    return this._viewChanged;
  }

  get settings(): IPanelSettings {
    return this._settings;
  }

  set settings(settings: IPanelSettings) {
    const old = this._settings;
    this._settings = settings;
    if (old.refreshInterval !== settings.refreshInterval) {
      this._clusterPoll.frequency = frequency(settings.refreshInterval);
      this._setJobPolls();
    }
    this._viewChanged.emit();
  }

  get view(): ViewName {
    return this._view;
  }

  set view(view: ViewName) {
    if (view === this._view) {
      return;
    }
    this._view = view;
    this._viewChanged.emit();
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
      this._clusterChanged.emit();
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
      this._viewChanged.emit();
    }
  }

  /** Open the Submit view prefilled. */
  requestSubmit(request: Omit<ISubmitRequest, 'serial'>): void {
    this._submitRequest = { ...request, serial: ++this._serial };
    this._view = 'submit';
    this._viewChanged.emit();
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
    this._startFeed();
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
    this._clusterChanged.emit();
    this._jobsChanged.emit();
    await this.refresh();
  }

  async loadTemplates(): Promise<void> {
    try {
      this._templates = await this.client.templates();
      this._templatesError = null;
    } catch (error) {
      this._templatesError = asApiError(error);
    }
    this._templatesChanged.emit();
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
    this._feed?.dispose();
    this._watch.dispose();
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
        this._clusterChanged.emit();
        throw error;
      }
    }
    if (this._view !== 'cluster' && this._nodes !== null) {
      this._clusterChanged.emit();
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
      this._clusterChanged.emit();
    }
  }

  private _submitInMain = false;
  private _view: ViewName;
  private _cluster: IClusterInfo | null = null;
  private _clusterError: ApiError | null = null;
  private _nodes: INode[] | null = null;
  private _nodesError: ApiError | null = null;
  private _nodesUpdated: Date | null = null;
  private _templates: ITemplateInfo[] | null = null;
  private _templatesError: ApiError | null = null;
  private _submitRequest: ISubmitRequest | null = null;
  private _serial = 0;
  private _started = false;
  private _isDisposed = false;
  private _clusterPoll: Poll;
  private _clusterChanged = new Signal<this, void>(this);
  private _templatesChanged = new Signal<this, void>(this);
  private _viewChanged = new Signal<this, void>(this);
}
