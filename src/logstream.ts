/**
 * Follows a job's log over the WebSocket and reconnects by itself from the last byte offset
 * received, so that a network drop loses and repeats nothing.
 */

import { JobState } from './models';
import { CLOSE_CODES, decodeBinaryFrame, LogFrame } from './logframes';

export { BINARY_DATA, CLOSE_CODES, decodeBinaryFrame } from './logframes';
export type { ICloseCode, LogFrame } from './logframes';

/** What the stream is doing, to tell the user. */
export type StreamPhase =
  'connecting' | 'live' | 'reconnecting' | 'paused' | 'ended' | 'failed';

export interface IStreamStatus {
  phase: StreamPhase;
  /** A sentence for the user, e.g. why it is reconnecting. */
  message: string;
  /** Seconds until the next try, when reconnecting. */
  retryIn?: number;
}

/** The subset of the WebSocket API the stream uses (tests give a fake). */
export interface ISocketLike {
  /** 'arraybuffer': binary messages arrive whole, not as Blobs to read later. */
  binaryType?: string;
  onopen: ((event: any) => void) | null;
  onmessage: ((event: { data: any }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: any) => void) | null;
  close(code?: number, reason?: string): void;
}

export interface ILogStreamOptions {
  /** The URL to open, resuming from the given offsets (rank -> byte offset). */
  url: (offsets: Map<number, number>) => string;
  /** Text that arrived for a rank. */
  onData: (rank: number, text: string) => void;
  /** The job's state changed (first frame, and on changes). */
  onState?: (state: JobState, reason: string | null) => void;
  /** The job finished: the log is complete. */
  onEnd?: (state: JobState, exitCode: number | null) => void;
  /** The connection's phase changed. */
  onStatus?: (status: IStreamStatus) => void;
  /** Opens a socket; defaults to the browser's WebSocket. */
  createSocket?: (url: string) => ISocketLike;
  /** First reconnect delay in ms; doubled on each failure up to maxDelay. */
  initialDelay?: number;
  maxDelay?: number;
  /** Reconnect when nothing (not even a heartbeat) arrived for this long, in ms. */
  inactivityTimeout?: number;
  /** Offsets to start from (after a snapshot). */
  offsets?: Map<number, number>;
}

export class LogStream {
  constructor(options: ILogStreamOptions) {
    this._options = options;
    this.offsets = new Map(options.offsets ?? []);
    this._delay = options.initialDelay ?? 1000;
  }

  /** The byte offset after the last text received, per rank. */
  readonly offsets: Map<number, number>;

  get status(): IStreamStatus {
    return this._status;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Start (or resume) following. */
  start(): void {
    if (this._disposed || this._ended) {
      return;
    }
    this._paused = false;
    this._connect('connecting', 'Connecting to the log…');
  }

  /** Stop following but keep the offsets: resume() continues where it stopped. */
  pause(): void {
    if (this._disposed || this._ended) {
      return;
    }
    this._paused = true;
    this._clearTimers();
    this._closeSocket();
    this._setStatus({
      phase: 'paused',
      message: 'Following is paused. New lines will appear when you resume.'
    });
  }

  resume(): void {
    this.start();
  }

  /** Reconnect now (the user asked), skipping the wait. */
  retryNow(): void {
    if (this._disposed || this._ended || this._paused) {
      return;
    }
    this._clearTimers();
    this._connect('connecting', 'Connecting to the log…');
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._clearTimers();
    this._closeSocket();
  }

  private _connect(phase: StreamPhase, message: string): void {
    this._closeSocket();
    this._setStatus({ phase, message });
    const create =
      this._options.createSocket ??
      ((url: string) => new WebSocket(url) as unknown as ISocketLike);
    let socket: ISocketLike;
    try {
      socket = create(this._options.url(this.offsets));
    } catch (error) {
      this._scheduleReconnect('Cannot open the log connection.');
      return;
    }
    this._socket = socket;
    socket.binaryType = 'arraybuffer';
    socket.onopen = () => {
      if (socket !== this._socket) {
        return;
      }
      this._delay = this._options.initialDelay ?? 1000;
      this._setStatus({ phase: 'live', message: 'Following the log live.' });
      this._armInactivity();
    };
    socket.onmessage = event => {
      if (socket !== this._socket) {
        return;
      }
      this._armInactivity();
      this._handleFrame(event.data);
    };
    socket.onerror = () => {
      // onclose follows with the code; nothing to do here.
    };
    socket.onclose = event => {
      if (socket !== this._socket) {
        return;
      }
      this._socket = null;
      this._clearTimers();
      this._handleClose(event.code, event.reason);
    };
  }

  private _handleFrame(raw: unknown): void {
    let frame: LogFrame;
    if (raw instanceof ArrayBuffer) {
      const data = decodeBinaryFrame(raw, this._decoder);
      if (data === null) {
        return;
      }
      frame = data;
    } else {
      try {
        frame = JSON.parse(String(raw));
      } catch (error) {
        return;
      }
    }
    switch (frame.type) {
      case 'data': {
        const rank = frame.rank ?? 0;
        const known = this.offsets.get(rank) ?? 0;
        if (typeof frame.offset === 'number' && frame.offset <= known) {
          // Already shown (a resend after a reconnect): skip it.
          return;
        }
        if (typeof frame.offset === 'number') {
          this.offsets.set(rank, frame.offset);
        }
        this._failures = 0;
        this._options.onData(rank, frame.data);
        break;
      }
      case 'status':
        this._options.onState?.(frame.state, frame.reason ?? null);
        break;
      case 'end':
        this._ended = true;
        this._options.onEnd?.(frame.state, frame.exit_code ?? null);
        this._setStatus({
          phase: 'ended',
          message: `The job ended: ${frame.state}.`
        });
        break;
      case 'error':
        // The close that follows says whether to retry; this is the whole message.
        this._errorMessage = frame.message;
        this._setStatus({ phase: this._status.phase, message: frame.message });
        break;
      default:
        break;
    }
  }

  private _handleClose(code: number, reason: string): void {
    if (this._disposed || this._paused) {
      return;
    }
    if (this._ended) {
      this._setStatus({
        phase: 'ended',
        message: this._status.message || 'The log is complete.'
      });
      return;
    }
    const known = CLOSE_CODES[code];
    if (code === 1000) {
      this._ended = true;
      this._setStatus({
        phase: 'ended',
        message: reason ? `The log is complete (${reason}).` : known.message
      });
      return;
    }
    const detail = this._errorMessage || reason;
    this._errorMessage = '';
    if (known?.retry === 'limited') {
      this._failures += 1;
    }
    const exhausted =
      known?.retry === 'limited' && this._failures > (known.maxRetries ?? 0);
    if (known && (known.retry === 'never' || exhausted)) {
      this._setStatus({
        phase: 'failed',
        message: detail ? `${known.message} (${detail})` : known.message
      });
      return;
    }
    const why = known
      ? known.message
      : 'The connection to the server was lost.';
    this._scheduleReconnect(why);
  }

  private _scheduleReconnect(why: string): void {
    const delay = this._delay;
    this._delay = Math.min(delay * 2, this._options.maxDelay ?? 15000);
    const seconds = Math.max(1, Math.round(delay / 1000));
    this._setStatus({
      phase: 'reconnecting',
      message: `${why} Reconnecting in ${seconds}s from where it stopped…`,
      retryIn: seconds
    });
    this._retryTimer = setTimeout(() => {
      this._retryTimer = null;
      if (!this._disposed && !this._paused) {
        this._connect('reconnecting', `${why} Reconnecting…`);
      }
    }, delay);
  }

  private _armInactivity(): void {
    const timeout = this._options.inactivityTimeout ?? 45000;
    if (this._idleTimer !== null) {
      clearTimeout(this._idleTimer);
    }
    this._idleTimer = setTimeout(() => {
      this._idleTimer = null;
      // No heartbeat for too long: the connection is dead without a close.
      const socket = this._socket;
      this._socket = null;
      if (socket) {
        socket.onclose = null;
        socket.close();
      }
      this._scheduleReconnect('The server stopped answering.');
    }, timeout);
  }

  private _clearTimers(): void {
    if (this._retryTimer !== null) {
      clearTimeout(this._retryTimer);
      this._retryTimer = null;
    }
    if (this._idleTimer !== null) {
      clearTimeout(this._idleTimer);
      this._idleTimer = null;
    }
  }

  private _closeSocket(): void {
    const socket = this._socket;
    this._socket = null;
    if (socket) {
      socket.onopen = null;
      socket.onmessage = null;
      socket.onclose = null;
      socket.onerror = null;
      try {
        socket.close(1000, 'client closed');
      } catch (error) {
        // Closing a socket that never opened can throw; it is gone either way.
      }
    }
  }

  private _setStatus(status: IStreamStatus): void {
    this._status = status;
    this._options.onStatus?.(status);
  }

  private _options: ILogStreamOptions;
  private _decoder = new TextDecoder();
  private _socket: ISocketLike | null = null;
  private _status: IStreamStatus = { phase: 'connecting', message: '' };
  private _delay: number;
  private _retryTimer: ReturnType<typeof setTimeout> | null = null;
  private _idleTimer: ReturnType<typeof setTimeout> | null = null;
  private _paused = false;
  private _ended = false;
  private _disposed = false;
  /** Closes in a row without new text (reset by a data frame). */
  private _failures = 0;
  /** The message of the error frame before the close, if any. */
  private _errorMessage = '';
}
