/**
 * The log stream's wire format as the panel reads it: the frames, the close codes and the
 * binary data frame's header. Copies of the server's protocol (jupyter_hyperpod/core/
 * logprotocol.py, docs/log-protocol.json), checked against it by the tests.
 */

import { JobState } from './models';

/**
 * The frames the server sends: JSON text frames, and with `frames=binary` in the URL each data
 * frame as a binary message (`BINARY_DATA`: a header, then the log's bytes).
 */
export type LogFrame =
  | { type: 'status'; state: JobState; reason?: string | null }
  | { type: 'data'; rank: number; offset: number; data: string }
  | { type: 'heartbeat'; time: number }
  | { type: 'end'; state: JobState; exit_code?: number | null }
  | {
      type: 'error';
      message: string;
      code?: string;
      field?: string | null;
      close?: number;
    };

/**
 * What a close code means for a retry: `never`, `backoff` (reconnect with growing delays) or
 * `limited` (at most `maxRetries` reconnects in a row without new text, then give up).
 */
export interface ICloseCode {
  retry: 'never' | 'backoff' | 'limited';
  maxRetries?: number;
  message: string;
}

/**
 * Close codes the server uses: a copy of the table of the server's log protocol
 * (jupyter_hyperpod/core/logprotocol.py, docs/log-protocol.json), checked by the tests.
 */
export const CLOSE_CODES: Record<number, ICloseCode> = {
  1000: { retry: 'never', message: 'The log is complete.' },
  1001: {
    retry: 'backoff',
    message: 'The server is shutting down or restarting.'
  },
  1011: {
    retry: 'limited',
    maxRetries: 5,
    message: 'The server failed while following the log.'
  },
  4000: { retry: 'never', message: 'The server refused the log request.' },
  4003: { retry: 'never', message: 'You may not read this log.' },
  4004: { retry: 'never', message: 'This job no longer exists.' },
  4009: {
    retry: 'never',
    message:
      'The job belongs to another cluster than the one the server is connected to.'
  },
  4503: {
    retry: 'backoff',
    message: 'The cluster cannot be reached right now.'
  }
};

/**
 * A binary data frame's header (big-endian): kind (uint8, 1 for data), rank (uint32), offset
 * after the chunk (uint64). A copy of the server's layout (docs/log-protocol.json,
 * `binary_data`), checked by the tests.
 */
export const BINARY_DATA = { kind: 1, headerBytes: 13 };

/** A binary data frame as the data frame it carries (null: a kind this client does not know). */
export function decodeBinaryFrame(
  buffer: ArrayBuffer,
  decoder: TextDecoder = new TextDecoder()
): { type: 'data'; rank: number; offset: number; data: string } | null {
  if (buffer.byteLength < BINARY_DATA.headerBytes) {
    return null;
  }
  const view = new DataView(buffer);
  if (view.getUint8(0) !== BINARY_DATA.kind) {
    return null;
  }
  const offset = view.getUint32(5) * 2 ** 32 + view.getUint32(9);
  return {
    type: 'data',
    rank: view.getUint32(1),
    offset,
    // Invalid UTF-8 becomes U+FFFD, as the server's text frame has it.
    data: decoder.decode(new Uint8Array(buffer, BINARY_DATA.headerBytes))
  };
}
