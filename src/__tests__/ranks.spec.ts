import { IJob, IRankInfo } from '../models';
import { factsBehind, matchCount, rankLabel, rankOnChange } from '../ranks';

function rank(r: number, state: string | null): IRankInfo {
  return {
    rank: r,
    node: 'node-1',
    state,
    exit_code: null,
    restarts: 0,
    log: null,
    ended: null,
    faults: []
  };
}

function job(extra: Partial<IJob>): IJob {
  return {
    id: 'train-abc123',
    name: 'train',
    user: 'me',
    orchestrator: 'local',
    backend_id: null,
    state: 'RUNNING',
    state_reason: null,
    created: 0,
    started: 1,
    ended: null,
    exit_code: null,
    ranks: [rank(0, 'RUNNING'), rank(1, 'RUNNING')],
    spec: { name: 'train', command: ['t.py'], nodes: 1, procs_per_node: 2 },
    events: [],
    mlflow_run_url: null,
    ...extra
  } as IJob;
}

describe('the rank picker tells what the server says of each rank', () => {
  it('names the failed rank even though its state is the job’s', () => {
    // The old label hid a rank whose state equalled the job's: the failed rank showed none.
    const failed = job({
      state: 'FAILED',
      failed_rank: 1,
      ranks: [rank(0, 'STOPPED'), rank(1, 'FAILED')]
    });
    expect(rankLabel(failed, 0)).toBe(' · STOPPED');
    expect(rankLabel(failed, 1)).toBe(' · FAILED (failed first)');
  });

  it('says running, pending, never started and nothing when unknown', () => {
    expect(rankLabel(job({}), 0)).toBe(' · RUNNING');
    expect(rankLabel(job({ ranks: [rank(0, 'PENDING')] }), 0)).toBe(
      ' · PENDING'
    );
    const ended = job({ state: 'CANCELLED', ranks: [rank(0, 'PENDING')] });
    expect(rankLabel(ended, 0)).toBe(' · never started');
    expect(rankLabel(job({ ranks: [rank(0, null)] }), 0)).toBe('');
    expect(rankLabel(job({ ranks: [] }), 3)).toBe('');
  });

  it('asks the server again when a rank it called pending prints', () => {
    expect(factsBehind(job({ ranks: [rank(0, 'PENDING')] }), 0)).toBe(true);
    expect(factsBehind(job({ ranks: [rank(0, 'STARTING')] }), 0)).toBe(true);
    expect(factsBehind(job({}), 0)).toBe(false);
    expect(factsBehind(job({ ranks: [] }), 0)).toBe(false);
  });
});

describe('a view moves to the failed rank when the job fails', () => {
  const running = job({});
  const failed = job({ state: 'FAILED', failed_rank: 1 });

  it('moves once, when the job fails while shown', () => {
    expect(rankOnChange(running, failed)).toBe(1);
    expect(rankOnChange(null, failed)).toBe(1);
    // Already shown failed on that rank: the user's own choice of rank stays.
    expect(rankOnChange(failed, failed)).toBeNull();
    expect(rankOnChange(failed, job({ state: 'FAILED', failed_rank: 0 }))).toBe(
      0
    );
  });

  it('stays for a running, succeeded or unblamed job', () => {
    expect(rankOnChange(null, running)).toBeNull();
    expect(rankOnChange(running, job({ state: 'SUCCEEDED' }))).toBeNull();
    expect(
      rankOnChange(running, job({ state: 'FAILED', failed_rank: null }))
    ).toBeNull();
  });
});

describe('the search count', () => {
  it('says where the match is among how many', () => {
    expect(matchCount(null)).toBe('');
    expect(matchCount({ resultIndex: -1, resultCount: 0 })).toBe('No match');
    expect(matchCount({ resultIndex: 2, resultCount: 12 })).toBe('3 of 12');
    // Past the addon's 1,000 highlighted matches it gives no index.
    expect(matchCount({ resultIndex: -1, resultCount: 1000 })).toBe('1,000+');
  });
});
