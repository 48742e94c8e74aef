import { JobFeed } from '../feed';
import { HyperpodClient } from '../api';
import { HyperpodModel } from '../model';
import { IJob } from '../models';
import { DEFAULT_SETTINGS } from '../settings';
import { FakeSocket } from './fixtures';

function job(id: string, state: IJob['state'] = 'RUNNING'): IJob {
  return { id, name: id, state } as IJob;
}

function setup() {
  const sockets: FakeSocket[] = [];
  const jobs: string[] = [];
  const resyncs: number[] = [];
  const connected: boolean[] = [];
  const feed = new JobFeed({
    url: (since, epoch) => `ws://x/feed?since=${since}&epoch=${epoch}`,
    onJob: j => jobs.push(`${j.id}:${j.state}`),
    onResync: () => resyncs.push(1),
    onConnected: c => connected.push(c),
    createSocket: url => {
      const socket = new FakeSocket(url);
      sockets.push(socket);
      return socket;
    },
    initialDelay: 1000,
    maxDelay: 4000
  });
  return { feed, sockets, jobs, resyncs, connected };
}

describe('JobFeed', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('reconnects with backoff and resumes after the last seq of its epoch', () => {
    const { feed, sockets, jobs, resyncs, connected } = setup();
    feed.start();
    expect(sockets[0].url).toBe('ws://x/feed?since=null&epoch=null');
    sockets[0].send({ type: 'hello', seq: 7, epoch: 'e1', time: 0 });
    expect(resyncs).toEqual([1]); // the first connection: fetch what happened before it
    sockets[0].send({ type: 'job', seq: 8, time: 0, id: 'a', job: job('a') });
    sockets[0].send({ type: 'heartbeat', seq: 8, time: 0 });
    expect(jobs).toEqual(['a:RUNNING']);
    expect(feed.seq).toBe(8);
    sockets[0].drop();
    expect(connected).toEqual([true, false]);
    expect(feed.connected).toBe(false);
    jest.advanceTimersByTime(999);
    expect(sockets).toHaveLength(1);
    jest.advanceTimersByTime(1);
    expect(sockets[1].url).toBe('ws://x/feed?since=8&epoch=e1');
    sockets[1].drop(); // refused again: the delay doubles
    jest.advanceTimersByTime(1999);
    expect(sockets).toHaveLength(2);
    jest.advanceTimersByTime(1);
    expect(sockets[2].url).toBe('ws://x/feed?since=8&epoch=e1');
    sockets[2].send({ type: 'hello', seq: 9, epoch: 'e1', time: 0 });
    sockets[2].send({
      type: 'job',
      seq: 9,
      time: 0,
      id: 'a',
      job: job('a', 'FAILED')
    });
    expect(jobs).toEqual(['a:RUNNING', 'a:FAILED']);
    expect(resyncs).toEqual([1]); // resumed: nothing to refetch
    sockets[2].send({
      type: 'resync',
      seq: 30,
      epoch: 'e1',
      time: 0,
      reason: 'gone'
    });
    expect(resyncs).toEqual([1, 1]);
    expect(feed.seq).toBe(30);
    feed.dispose();
    expect(sockets[2].closed).toBe(true);
  });

  it('reconnects when even heartbeats stop', () => {
    const { feed, sockets } = setup();
    feed.start();
    sockets[0].send({ type: 'hello', seq: 0, epoch: 'e1', time: 0 });
    jest.advanceTimersByTime(45000);
    expect(sockets[0].closed).toBe(true);
    jest.advanceTimersByTime(1000);
    expect(sockets[1].url).toBe('ws://x/feed?since=0&epoch=e1');
    feed.dispose();
  });
});

describe('HyperpodModel with the feed', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('shows a pushed change at once and polls slower only while the feed is up', () => {
    const sockets: FakeSocket[] = [];
    (globalThis as any).WebSocket = jest.fn((url: string) => {
      const socket = new FakeSocket(url);
      sockets.push(socket);
      return socket;
    });
    const client = {
      jobs: jest.fn(async () => ({ jobs: [job('a', 'PENDING')], total: 1 })),
      cluster: jest.fn(() => new Promise(() => undefined)),
      templates: jest.fn(() => new Promise(() => undefined)),
      feedUrl: (since: number | null) => `ws://x/feed?since=${since}`
    } as unknown as HyperpodClient;
    const m = new HyperpodModel(client, DEFAULT_SETTINGS);
    m.start();
    const jobsPoll = () => (m as any)._jobsPoll.frequency.interval;
    expect(jobsPoll()).toBe(10000); // the feed not up yet: polling as before
    const rows: string[] = [];
    const views: string[] = [];
    m.jobsChanged.connect(() =>
      rows.push((m.jobs ?? []).map(j => j.state).join())
    );
    m.jobChanged.connect((_, j) => views.push(j.state));
    (m as any)._jobs = [job('a', 'PENDING')];
    sockets[0].send({ type: 'hello', seq: 1, epoch: 'e', time: 0 });
    expect(m.pushed).toBe(true);
    expect(jobsPoll()).toBe(60000);
    sockets[0].send({ type: 'job', seq: 2, time: 0, id: 'a', job: job('a') });
    expect(views).toEqual(['RUNNING']);
    expect(rows[rows.length - 1]).toBe('RUNNING');
    sockets[0].drop(); // down: the fallback polls at the usual interval
    expect(m.pushed).toBe(false);
    expect(jobsPoll()).toBe(10000);
    m.dispose();
    delete (globalThis as any).WebSocket;
  });
});
