import {
  BINARY_DATA,
  CLOSE_CODES,
  decodeBinaryFrame,
  IStreamStatus,
  LogStream
} from '../logstream';
import { FakeSocket } from './fixtures';

// The server's table (docs/log-protocol.json, written from jupyter_hyperpod/core/logprotocol.py).
declare function require(name: string): any;
declare const __dirname: string;
const protocol = JSON.parse(
  require('fs').readFileSync(
    require('path').join(__dirname, '..', '..', 'docs', 'log-protocol.json'),
    'utf-8'
  )
);

function setup(
  options: Partial<ConstructorParameters<typeof LogStream>[0]> = {}
) {
  const sockets: FakeSocket[] = [];
  const text: string[] = [];
  const statuses: IStreamStatus[] = [];
  const ends: string[] = [];
  const stream = new LogStream({
    url: offsets => `ws://x/stream?offset=${offsets.get(0) ?? 0}`,
    onData: (rank, data) => text.push(`${rank}:${data}`),
    onStatus: status => statuses.push(status),
    onEnd: state => ends.push(state),
    createSocket: url => {
      const socket = new FakeSocket(url);
      sockets.push(socket);
      return socket;
    },
    initialDelay: 1000,
    maxDelay: 4000,
    inactivityTimeout: 45000,
    ...options
  });
  return { stream, sockets, text, statuses, ends };
}

describe('LogStream', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('writes data frames and remembers the offset after each', () => {
    const { stream, sockets, text } = setup();
    stream.start();
    sockets[0].open();
    expect(stream.status.phase).toBe('live');
    sockets[0].send({ type: 'status', state: 'RUNNING' });
    sockets[0].send({ type: 'data', rank: 0, offset: 6, data: 'hello\n' });
    sockets[0].send({ type: 'heartbeat', time: 1 });
    sockets[0].send({ type: 'data', rank: 0, offset: 12, data: 'world\n' });
    expect(text).toEqual(['0:hello\n', '0:world\n']);
    expect(stream.offsets.get(0)).toBe(12);
  });

  it('starts from the snapshot offset', () => {
    const { stream, sockets } = setup({ offsets: new Map([[0, 500]]) });
    stream.start();
    expect(sockets[0].url).toBe('ws://x/stream?offset=500');
  });

  it('reconnects after a network drop from the last offset, telling the user', () => {
    const { stream, sockets, text, statuses } = setup();
    stream.start();
    sockets[0].open();
    sockets[0].send({ type: 'data', rank: 0, offset: 3, data: 'ab\n' });
    sockets[0].drop(1006);
    expect(stream.status.phase).toBe('reconnecting');
    expect(stream.status.message).toMatch(/lost.*Reconnecting in 1s/);
    expect(sockets).toHaveLength(1);
    jest.advanceTimersByTime(1000);
    expect(sockets).toHaveLength(2);
    expect(sockets[1].url).toBe('ws://x/stream?offset=3');
    sockets[1].open();
    // A repeated chunk (already shown) is skipped; new text follows.
    sockets[1].send({ type: 'data', rank: 0, offset: 3, data: 'ab\n' });
    sockets[1].send({ type: 'data', rank: 0, offset: 6, data: 'cd\n' });
    expect(text).toEqual(['0:ab\n', '0:cd\n']);
    expect(statuses.map(s => s.phase)).toEqual([
      'connecting',
      'live',
      'reconnecting',
      'reconnecting',
      'live'
    ]);
  });

  it('backs off while the cluster is unreachable and resets once connected', () => {
    const { stream, sockets } = setup();
    stream.start();
    sockets[0].drop(4503, 'cluster unreachable');
    expect(stream.status.message).toMatch(/cluster cannot be reached/);
    jest.advanceTimersByTime(1000);
    sockets[1].drop(4503);
    expect(stream.status.retryIn).toBe(2);
    jest.advanceTimersByTime(2000);
    sockets[2].drop(4503);
    expect(stream.status.retryIn).toBe(4);
    jest.advanceTimersByTime(4000);
    sockets[3].drop(4503);
    expect(stream.status.retryIn).toBe(4); // capped at maxDelay
    jest.advanceTimersByTime(4000);
    sockets[4].open();
    sockets[4].drop(1011);
    expect(stream.status.retryIn).toBe(1);
  });

  it('stops for good at the end of the job', () => {
    const { stream, sockets, ends } = setup();
    stream.start();
    sockets[0].open();
    sockets[0].send({ type: 'end', state: 'SUCCEEDED', exit_code: 0 });
    sockets[0].drop(1000, 'job SUCCEEDED');
    expect(ends).toEqual(['SUCCEEDED']);
    expect(stream.status.phase).toBe('ended');
    jest.advanceTimersByTime(60000);
    expect(sockets).toHaveLength(1);
  });

  it('does not retry a job that does not exist', () => {
    const { stream, sockets } = setup();
    stream.start();
    sockets[0].drop(4004, 'job not found');
    expect(stream.status.phase).toBe('failed');
    expect(stream.status.message).toMatch(/no longer exists/);
    jest.advanceTimersByTime(60000);
    expect(sockets).toHaveLength(1);
  });

  it('pauses without losing its place and resumes from it', () => {
    const { stream, sockets } = setup();
    stream.start();
    sockets[0].open();
    sockets[0].send({ type: 'data', rank: 0, offset: 42, data: 'x' });
    stream.pause();
    expect(sockets[0].closed).toBe(true);
    expect(stream.status.phase).toBe('paused');
    jest.advanceTimersByTime(60000);
    expect(sockets).toHaveLength(1);
    stream.resume();
    expect(sockets[1].url).toBe('ws://x/stream?offset=42');
  });

  it('reconnects when even heartbeats stop arriving', () => {
    const { stream, sockets } = setup({ inactivityTimeout: 30000 });
    stream.start();
    sockets[0].open();
    jest.advanceTimersByTime(20000);
    sockets[0].send({ type: 'heartbeat', time: 1 });
    jest.advanceTimersByTime(20000);
    expect(sockets).toHaveLength(1);
    jest.advanceTimersByTime(10000);
    expect(sockets[0].closed).toBe(true);
    expect(stream.status.message).toMatch(/stopped answering/);
    jest.advanceTimersByTime(1000);
    expect(sockets).toHaveLength(2);
  });

  it('keeps one offset per rank when following all ranks', () => {
    const { stream, sockets, text } = setup({
      url: offsets =>
        Array.from(offsets.entries())
          .map(([r, o]) => `${r}:${o}`)
          .join(',')
    });
    stream.start();
    sockets[0].open();
    sockets[0].send({ type: 'data', rank: 1, offset: 10, data: 'b' });
    sockets[0].send({ type: 'data', rank: 0, offset: 4, data: 'a' });
    sockets[0].drop(1006);
    jest.advanceTimersByTime(1000);
    expect(sockets[1].url).toBe('1:10,0:4');
    expect(text).toEqual(['1:b', '0:a']);
  });

  it('keeps the same close codes as the server', () => {
    const server: Record<number, unknown> = {};
    for (const close of protocol.close_codes) {
      server[close.code] = {
        retry: close.retry,
        message: close.message,
        ...(close.max_retries !== undefined
          ? { maxRetries: close.max_retries }
          : {})
      };
    }
    expect(CLOSE_CODES).toEqual(server);
    expect(protocol.frames).toEqual(
      expect.arrayContaining(['status', 'data', 'heartbeat', 'end', 'error'])
    );
  });

  it('retries a server error a few times, then says it failed', () => {
    const { stream, sockets } = setup();
    const limit = CLOSE_CODES[1011].maxRetries ?? 0;
    stream.start();
    for (let i = 0; i < limit; i++) {
      sockets[i].open();
      sockets[i].drop(1011);
      expect(stream.status.phase).toBe('reconnecting');
      jest.advanceTimersByTime(60000);
    }
    sockets[limit].open();
    sockets[limit].send({
      type: 'error',
      code: 'internal_error',
      message: 'server error while following the log (see the server log)',
      close: 1011
    });
    sockets[limit].drop(1011, 'server error');
    expect(stream.status.phase).toBe('failed');
    expect(stream.status.message).toMatch(/see the server log/);
    jest.advanceTimersByTime(60000);
    expect(sockets).toHaveLength(limit + 1);
  });

  it('shows the whole message of the error frame when it stops', () => {
    const { stream, sockets } = setup();
    stream.start();
    sockets[0].open();
    const message =
      'offset must be between 0 and 9007199254740991 ' + 'x'.repeat(200);
    sockets[0].send({
      type: 'error',
      code: 'invalid_request',
      message,
      close: 4000
    });
    sockets[0].drop(4000, message.slice(0, 120));
    expect(stream.status.phase).toBe('failed');
    expect(stream.status.message).toContain(message);
    expect(sockets).toHaveLength(1);
  });

  it('closes its socket and schedules nothing once disposed', () => {
    const { stream, sockets } = setup();
    stream.start();
    sockets[0].drop(1006);
    stream.dispose();
    jest.advanceTimersByTime(60000);
    expect(sockets).toHaveLength(1);
    expect(stream.isDisposed).toBe(true);
  });
});

describe('binary data frames (frames=binary)', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  function binaryFrame(rank: number, offset: number, bytes: Uint8Array) {
    const buffer = new ArrayBuffer(13 + bytes.length);
    const view = new DataView(buffer);
    view.setUint8(0, 1);
    view.setUint32(1, rank);
    view.setUint32(5, Math.floor(offset / 2 ** 32));
    view.setUint32(9, offset % 2 ** 32);
    new Uint8Array(buffer, 13).set(bytes);
    return buffer;
  }

  it('keeps the header layout of the server', () => {
    const layout = protocol.binary_data;
    expect(layout.header_bytes).toBe(BINARY_DATA.headerBytes);
    expect(layout.byte_order).toBe('big');
    expect(layout.fields.map((f: any) => [f.name, f.type])).toEqual([
      ['kind', 'uint8'],
      ['rank', 'uint32'],
      ['offset', 'uint64']
    ]);
    expect(layout.fields[0].value).toBe(BINARY_DATA.kind);
  });

  it('reads binary data frames as it reads text ones, skipping resends', () => {
    const { stream, sockets, text } = setup();
    stream.start();
    expect(sockets[0].binaryType).toBe('arraybuffer');
    sockets[0].open();
    sockets[0].send({ type: 'status', state: 'RUNNING' });
    const utf8 = new TextEncoder().encode('é 中\n');
    const far = 2 ** 40 + 7;
    sockets[0].onmessage?.({ data: binaryFrame(2, far, utf8) });
    sockets[0].onmessage?.({ data: binaryFrame(2, far, utf8) });
    sockets[0].onmessage?.({
      data: binaryFrame(2, far + 3, new Uint8Array([0x6f, 0xff, 0x0a]))
    });
    expect(text).toEqual(['2:é 中\n', '2:o\ufffd\n']);
    expect(stream.offsets.get(2)).toBe(far + 3);
  });

  it('skips a binary frame of a kind it does not know', () => {
    const frame = binaryFrame(0, 5, new Uint8Array([0x61]));
    new DataView(frame).setUint8(0, 9);
    expect(decodeBinaryFrame(frame)).toBeNull();
    expect(decodeBinaryFrame(new ArrayBuffer(4))).toBeNull();
  });
});
