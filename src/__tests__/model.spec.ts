import { HyperpodClient } from '../api';
import { HyperpodModel } from '../model';
import { IJob } from '../models';
import { DEFAULT_SETTINGS } from '../settings';

function job(id: string, state: IJob['state'] = 'RUNNING'): IJob {
  return { id, name: id, state } as IJob;
}

function model(): HyperpodModel {
  const client = {
    jobs: jest.fn(async () => ({ jobs: [job('a')], total: 1 }))
  } as unknown as HyperpodClient;
  return new HyperpodModel(client, DEFAULT_SETTINGS);
}

describe('HyperpodModel', () => {
  it('polls only while the panel is visible', () => {
    const m = model();
    const standby = (m as any)._clusterPoll.standby as () => boolean | string;
    m.isVisible = () => false;
    expect(standby()).toBe(true);
    m.isVisible = () => true;
    expect(standby()).toBe('when-hidden');
    m.dispose();
  });

  it('applies a new refresh interval to its polls at once', () => {
    const m = model();
    expect((m as any)._jobsPoll.frequency.interval).toBe(10000);
    m.settings = { ...DEFAULT_SETTINGS, refreshInterval: 3 };
    expect((m as any)._jobsPoll.frequency.interval).toBe(3000);
    expect((m as any)._clusterPoll.frequency.interval).toBe(3000);
    m.dispose();
  });

  it('shows a submitted or cancelled job without waiting for a poll', () => {
    const m = model();
    const seen = jest.fn();
    m.jobsChanged.connect(seen);
    m.upsertJob(job('a'));
    m.upsertJob(job('b'));
    m.upsertJob(job('a', 'CANCELLED'));
    expect(m.jobs?.map(j => `${j.id}:${j.state}`)).toEqual([
      'b:RUNNING',
      'a:CANCELLED'
    ]);
    expect(m.jobsTotal).toBe(2);
    expect(seen).toHaveBeenCalledTimes(3);
    m.dispose();
  });

  it('takes a job handed back by a view it was sent to once, without an echo', () => {
    const m = model();
    const changed = jest.fn((_: unknown, j: IJob) => m.upsertJob(j));
    m.jobChanged.connect(changed);
    m.upsertJob(job('a'));
    (m as any)._pushed(job('a', 'SUCCEEDED'));
    expect(changed).toHaveBeenCalledTimes(2);
    expect(m.jobs?.map(j => `${j.id}:${j.state}`)).toEqual(['a:SUCCEEDED']);
    m.dispose();
  });

  it('says when a job seen running ends, once, even with the panel hidden', async () => {
    let state: IJob['state'] = 'RUNNING';
    const client = {
      jobs: jest.fn(async () => ({ jobs: [job('a', state)], total: 1 })),
      job: jest.fn(async (id: string) => job(id, state))
    } as unknown as HyperpodClient;
    const m = new HyperpodModel(client, DEFAULT_SETTINGS);
    const ended: string[] = [];
    m.jobEnded.connect((_, j) => ended.push(`${j.id}:${j.state}`));
    // Jobs already finished when first seen are not news.
    m.upsertJob(job('old', 'FAILED'));
    await (m as any)._refreshJobs();
    await (m as any)._watchJobs();
    expect(ended).toEqual([]);
    m.isVisible = () => false;
    state = 'FAILED';
    await (m as any)._watchJobs();
    expect(ended).toEqual(['a:FAILED']);
    expect(m.jobs?.find(j => j.id === 'a')?.state).toBe('FAILED');
    await (m as any)._refreshJobs();
    await (m as any)._watchJobs();
    expect(ended).toEqual(['a:FAILED']);
    // Nothing runs: the watch asks nothing.
    expect((client.job as jest.Mock).mock.calls.length).toBe(2);
    m.dispose();
  });

  it('opens the Submit view for each request, once per request', () => {
    const m = model();
    m.requestSubmit({ template: 'script', params: { script: 'a.py' } });
    const first = m.submitRequest!.serial;
    expect(m.view).toBe('submit');
    m.view = 'jobs';
    m.requestSubmit({ template: 'script', params: { script: 'b.py' } });
    expect(m.view).toBe('submit');
    expect(m.submitRequest!.serial).toBe(first + 1);
    expect(m.submitRequest!.params).toEqual({ script: 'b.py' });
    m.dispose();
  });

  it('filters jobs by state from the first page', async () => {
    const m = model();
    m.jobsOffset = 50;
    m.jobsState = 'FAILED';
    expect(m.jobsOffset).toBe(0);
    Object.defineProperty(document, 'hidden', {
      value: false,
      configurable: true
    });
    const calls = (m.client.jobs as jest.Mock).mock.calls;
    void m.refreshJobs();
    for (let i = 0; i < 50 && calls.length === 0; i++) {
      await new Promise(resolve => setTimeout(resolve, 20));
    }
    const jobs = calls;
    expect(jobs[jobs.length - 1][0]).toEqual({
      state: 'FAILED',
      limit: 50,
      offset: 0
    });
    m.dispose();
  });
});
