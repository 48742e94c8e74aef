/**
 * The job feed (`GET hyperpod/api/feed`, docs/openapi.json's FeedEvent): one WebSocket a panel
 * that the server pushes job changes on as its tracker sees them. Reconnects with a growing
 * delay and `since` (the last seq) + `epoch`, so nothing is missed; a `resync` (the server no
 * longer holds what was missed) asks for a refetch. While it is down, `connected` is false and
 * the model polls as before.
 */

import type { components } from './generated/openapi';
import type { ISocketLike } from './logstream';
import type { IJob } from './models';

export type FeedEvent = components['schemas']['FeedEvent'];

export interface IJobFeedOptions {
  /** The feed's URL resuming after `since` (null: from now on) of numbering `epoch`. */
  url: (since: number | null, epoch: string | null) => string;
  /** A job changed (state, progress, ranks, watchdog). */
  onJob: (job: IJob) => void;
  /** A job is gone from the history. */
  onRemoved?: (id: string) => void;
  /** The user's unfinished jobs by state (PENDING, RUNNING). */
  onQueue?: (counts: Record<string, number>) => void;
  /** Changes were missed (or this is the first connection): refetch the jobs. */
  onResync: () => void;
  /** The socket came up (true: pushed changes flow) or went down (false: poll). */
  onConnected?: (connected: boolean) => void;
  createSocket?: (url: string) => ISocketLike;
  /** First reconnect delay in ms; doubled on each failure up to maxDelay. */
  initialDelay?: number;
  maxDelay?: number;
  /** Reconnect when nothing (not even a heartbeat) arrived for this long, in ms. */
  inactivityTimeout?: number;
}

export class JobFeed {
  constructor(options: IJobFeedOptions) {
    this._options = options;
    this._delay = options.initialDelay ?? 1000;
  }

  /** Pushed changes are flowing (the socket is open and said hello). */
  get connected(): boolean {
    return this._connected;
  }

  /** The last seq received (null before the first hello). */
  get seq(): number | null {
    return this._seq;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  start(): void {
    if (!this._socket && !this._timer && !this._disposed) {
      this._connect();
    }
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._clearTimers();
    this._drop();
  }

  private _connect(): void {
    this._timer = null;
    const create =
      this._options.createSocket ??
      ((url: string) => new WebSocket(url) as unknown as ISocketLike);
    let socket: ISocketLike;
    try {
      socket = create(this._options.url(this._seq, this._epoch));
    } catch {
      this._retry();
      return;
    }
    this._socket = socket;
    socket.onmessage = event => {
      if (this._socket === socket) {
        this._receive(String(event.data));
      }
    };
    socket.onclose = () => {
      if (this._socket === socket) {
        this._socket = null;
        this._setConnected(false);
        this._retry();
      }
    };
    socket.onerror = () => undefined; // onclose follows
    this._watchInactivity();
  }

  private _receive(text: string): void {
    let event: FeedEvent;
    try {
      event = JSON.parse(text) as FeedEvent;
    } catch {
      return;
    }
    this._watchInactivity();
    switch (event.type) {
      case 'hello': {
        const first = this._epoch === null;
        const restarted = !first && event.epoch !== this._epoch;
        this._epoch = event.epoch;
        this._delay = this._options.initialDelay ?? 1000;
        this._setConnected(true);
        if (this._seq === null || restarted) {
          this._seq = event.seq;
        }
        if (first) {
          this._options.onResync(); // what changed before it connected
        }
        return;
      }
      case 'resync':
        this._seq = event.seq;
        this._epoch = event.epoch;
        this._options.onResync();
        return;
      case 'heartbeat':
        return;
      case 'job':
        this._options.onJob(event.job);
        break;
      case 'removed':
        this._options.onRemoved?.(event.id);
        break;
      case 'queue':
        this._options.onQueue?.(event.counts);
        break;
    }
    this._seq = event.seq;
  }

  private _retry(): void {
    if (this._disposed || this._timer) {
      return;
    }
    const delay = this._delay;
    this._delay = Math.min(delay * 2, this._options.maxDelay ?? 30000);
    this._timer = setTimeout(() => this._connect(), delay);
  }

  private _watchInactivity(): void {
    if (this._idle) {
      clearTimeout(this._idle);
    }
    this._idle = setTimeout(() => {
      this._idle = null;
      this._drop(); // silent too long: a dead connection
      this._retry();
    }, this._options.inactivityTimeout ?? 45000);
  }

  private _drop(): void {
    const socket = this._socket;
    this._socket = null;
    if (socket) {
      socket.onclose = null;
      socket.onmessage = null;
      socket.close();
    }
    this._setConnected(false);
  }

  private _setConnected(connected: boolean): void {
    if (connected !== this._connected) {
      this._connected = connected;
      this._options.onConnected?.(connected);
    }
  }

  private _clearTimers(): void {
    if (this._timer) {
      clearTimeout(this._timer);
      this._timer = null;
    }
    if (this._idle) {
      clearTimeout(this._idle);
      this._idle = null;
    }
  }

  private _options: IJobFeedOptions;
  private _socket: ISocketLike | null = null;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _idle: ReturnType<typeof setTimeout> | null = null;
  private _delay = 1000;
  private _seq: number | null = null;
  private _epoch: string | null = null;
  private _connected = false;
  private _disposed = false;
}
