import { ServerConnection } from '@jupyterlab/services';

import { requestAPI } from './handler';
import {
  FileSort,
  IAwsClusterList,
  IAwsConnectRequest,
  IChainSubmitted,
  IClusterInfo,
  IFileListing,
  IForgottenJob,
  IJob,
  IJobChain,
  IJobComparison,
  IJobDiff,
  IJobList,
  IJobMetrics,
  ILogSnapshot,
  INode,
  IRendered,
  IStackDump,
  IQueuePage,
  IQueueLogs,
  IQueueQuery,
  ISweep,
  ISweepList,
  ISweepRequest,
  ITemplateInfo,
  JobState,
  Submission
} from './models';

/** The most jobs `GET compare` takes at once (the server's core/compare.py MAX_COMPARED). */
export const MAX_COMPARED = 10;

/** Query string from the defined values of `params`. */
export function queryString(
  params: Record<string, string | number | undefined | null>
): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') {
      search.append(key, String(value));
    }
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

/**
 * The typed client of the hyperpod REST API: the only place the panel talks to the server.
 */
export class HyperpodClient {
  constructor(
    readonly serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  private _get<T>(path: string): Promise<T> {
    return requestAPI<T>(path, { method: 'GET' }, this.serverSettings);
  }

  private _send<T>(method: string, path: string, body?: unknown): Promise<T> {
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { 'Content-Type': 'application/json' };
    }
    return requestAPI<T>(path, init, this.serverSettings);
  }

  cluster(): Promise<IClusterInfo> {
    return this._get('cluster');
  }

  async nodes(): Promise<INode[]> {
    const reply = await this._get<{ nodes: INode[] }>('nodes');
    return reply.nodes;
  }

  /** The HyperPod clusters of the region (default: the server's). */
  awsClusters(region?: string): Promise<IAwsClusterList> {
    return this._get('aws/clusters' + queryString({ region }));
  }

  /** Connect the server to an EKS HyperPod cluster; answers the cluster it now drives. */
  awsConnect(request: IAwsConnectRequest): Promise<IClusterInfo> {
    return this._send('POST', 'aws/connect', request);
  }

  files(
    path: string,
    options: { offset?: number; limit?: number; sort?: FileSort } = {}
  ): Promise<IFileListing> {
    return this._get(
      'files' +
        queryString({
          path,
          offset: options.offset,
          limit: options.limit,
          sort: options.sort
        })
    );
  }

  async templates(): Promise<ITemplateInfo[]> {
    const reply = await this._get<{ templates: ITemplateInfo[] }>('templates');
    return reply.templates;
  }

  render(submission: Submission): Promise<IRendered> {
    return this._send('POST', 'jobs/render', submission);
  }

  submit(submission: Submission): Promise<IJob> {
    return this._send('POST', 'jobs', submission);
  }

  jobs(
    options: { state?: JobState | ''; limit?: number; offset?: number } = {}
  ): Promise<IJobList> {
    return this._get(
      'jobs' +
        queryString({
          state: options.state,
          limit: options.limit,
          offset: options.offset
        })
    );
  }

  job(id: string): Promise<IJob> {
    return this._get(`jobs/${encodeURIComponent(id)}`);
  }

  cancel(id: string): Promise<IJob> {
    return this._send('DELETE', `jobs/${encodeURIComponent(id)}`);
  }

  /** Remove a job from the history (cancelled first if it runs), its files kept or deleted. */
  forget(id: string, deleteFiles: boolean): Promise<IForgottenJob> {
    return this._send(
      'DELETE',
      `jobs/${encodeURIComponent(id)}` +
        queryString({ forget: 'true', delete_files: String(deleteFiles) })
    );
  }

  logs(id: string, rank = 0, tail = 1000): Promise<ILogSnapshot> {
    return this._get(
      `jobs/${encodeURIComponent(id)}/logs` + queryString({ rank, tail })
    );
  }

  metrics(id: string): Promise<IJobMetrics> {
    return this._get(`jobs/${encodeURIComponent(id)}/metrics`);
  }

  /** A Python stack of every rank of a running job (py-spy dump), stored with the job. */
  dumpStacks(id: string): Promise<IStackDump> {
    return this._send('POST', `jobs/${encodeURIComponent(id)}/stacks`, {});
  }

  /** The job's last stack dump. */
  stacks(id: string): Promise<IStackDump> {
    return this._get(`jobs/${encodeURIComponent(id)}/stacks`);
  }

  /** What differs between two jobs: spec, resolved configs, code files, packages. */
  diff(a: string, b: string): Promise<IJobDiff> {
    return this._get(
      `jobs/${encodeURIComponent(a)}/diff/${encodeURIComponent(b)}`
    );
  }

  /** Jobs side by side (2 to MAX_COMPARED): outcome, differing values, final metrics. */
  compare(ids: string[]): Promise<IJobComparison> {
    return this._get('compare' + queryString({ ids: ids.join(',') }));
  }

  /** Every job linked to this one by `after` (a chain), oldest first. */
  chain(id: string): Promise<IJobChain> {
    return this._get(`jobs/${encodeURIComponent(id)}/chain`);
  }

  /** Run a chain again from its failed link: that link and what waited on it. */
  resume(id: string, withChanges = false): Promise<IChainSubmitted> {
    return this._send('POST', `jobs/${encodeURIComponent(id)}/resume`, {
      with_changes: withChanges
    });
  }

  /** Submit a sweep: one job per point, every one checked before any is stored. */
  submitSweep(request: ISweepRequest): Promise<ISweep> {
    return this._send('POST', 'sweeps', request);
  }

  /** The user's sweeps (group rows), newest first. */
  sweeps(): Promise<ISweepList> {
    return this._get('sweeps');
  }

  /** Cancel every unfinished member of a sweep (the waiting ones first). */
  cancelSweep(id: string): Promise<ISweep> {
    return this._send('POST', `sweeps/${encodeURIComponent(id)}/cancel`, {});
  }

  /** A page of the cluster's queue: every user's jobs (GET queue). */
  queue(query: IQueueQuery = {}): Promise<IQueuePage> {
    return this._get(
      'queue' +
        queryString({
          mine: query.mine ? 'true' : undefined,
          state: query.state,
          queue: query.queue,
          offset: query.offset,
          limit: query.limit,
          refresh: query.refresh ? 'true' : undefined
        })
    );
  }

  /** Open one of my jobs submitted elsewhere (a queue row) as a job of this server. */
  adopt(queueId: string): Promise<IJob> {
    return this._send('POST', 'queue/adopt', { id: queueId });
  }

  /** A queue row's log, read-only, where the cluster lets this user read it. */
  queueLogs(queueId: string, tail = 200): Promise<IQueueLogs> {
    return this._get('queue/logs' + queryString({ id: queueId, tail }));
  }

  /**
   * The WebSocket URL that follows a job's log, with the token only where JupyterLab's own
   * websockets carry it (`appendToken`).
   */
  logStreamUrl(
    id: string,
    rank: number | 'all',
    offsets: Map<number, number>
  ): string {
    const settings = this.serverSettings;
    const base = settings.wsUrl.endsWith('/')
      ? settings.wsUrl
      : settings.wsUrl + '/';
    const params: Record<string, string | number | undefined> = {
      rank: String(rank),
      // Data frames as binary messages: the log's bytes, no JSON to parse (src/logstream.ts).
      frames: 'binary'
    };
    if (rank === 'all') {
      if (offsets.size > 0) {
        params.offsets = Array.from(offsets.entries())
          .sort((a, b) => a[0] - b[0])
          .map(([r, o]) => `${r}:${o}`)
          .join(',');
      }
    } else {
      params.offset = offsets.get(rank) ?? 0;
    }
    // As JupyterLab's own sockets: the token goes in the URL only when the settings say so
    // (another host); on the same host the browser's session cookie authenticates, and a token
    // in a URL would end up in proxies' access logs.
    if (settings.appendToken && settings.token) {
      params.token = settings.token;
    }
    return (
      `${base}hyperpod/api/jobs/${encodeURIComponent(id)}/logs/stream` +
      queryString(params)
    );
  }

  /** The job feed's WebSocket URL (`src/feed.ts`), resuming after `since` of `epoch`. */
  feedUrl(since: number | null, epoch: string | null): string {
    const settings = this.serverSettings;
    const base = settings.wsUrl.endsWith('/')
      ? settings.wsUrl
      : settings.wsUrl + '/';
    const params: Record<string, string | number | undefined> = {};
    if (since !== null) {
      params.since = since;
      params.epoch = epoch ?? undefined;
    }
    if (settings.appendToken && settings.token) {
      params.token = settings.token; // as logStreamUrl: only where JupyterLab's sockets do
    }
    return `${base}hyperpod/api/feed` + queryString(params);
  }
}
