import { render, screen } from '@testing-library/react';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { JobDiagnosis } from '../components/JobDiagnosis';
import {
  endedMessage,
  failedRank,
  jobEndNotice,
  restartSummary,
  waitingReason
} from '../diagnosis';
import { IJob, IRankInfo } from '../models';

function rank(r: number, extra: Partial<IRankInfo> = {}): IRankInfo {
  return {
    rank: r,
    node: `node-${r}`,
    state: 'SUCCEEDED',
    exit_code: 0,
    restarts: 0,
    log: null,
    ...extra
  };
}

function job(extra: Partial<IJob>): IJob {
  return {
    id: 'train-abc123',
    name: 'train',
    user: 'me',
    orchestrator: 'local',
    backend_id: null,
    state: 'FAILED',
    state_reason: null,
    created: 0,
    started: 1,
    ended: 2,
    exit_code: 1,
    ranks: [rank(0), rank(1)],
    spec: { name: 'train', command: ['t.py'], nodes: 1, procs_per_node: 2 },
    events: [],
    mlflow_run_url: null,
    ...extra
  } as IJob;
}

describe('which rank failed first', () => {
  it('takes the rank the reason names', () => {
    expect(
      failedRank(
        job({
          state_reason: 'rank 1 exited with code 3',
          ranks: [rank(0, { exit_code: -15 }), rank(1, { exit_code: 3 })]
        })
      )
    ).toBe(1);
  });

  it('prefers a rank that failed on its own over one stopped after it', () => {
    expect(
      failedRank(
        job({
          ranks: [
            rank(0, { exit_code: 143, state: 'FAILED' }),
            rank(1, { exit_code: 2, state: 'FAILED' }),
            rank(2, { exit_code: 1, state: 'FAILED' })
          ]
        })
      )
    ).toBe(1);
    expect(
      failedRank(job({ ranks: [rank(0), rank(1, { exit_code: -9 })] }))
    ).toBe(1);
  });

  it('is null for a job that did not fail or blames no rank', () => {
    expect(failedRank(job({ state: 'SUCCEEDED' }))).toBeNull();
    expect(failedRank(job({ ranks: [] }))).toBeNull();
  });
});

describe('why pending, how it ended', () => {
  it("says the scheduler's reason, else the latest event", () => {
    expect(
      waitingReason(
        job({ state: 'PENDING', state_reason: 'Resources (Slurm)' })
      )
    ).toBe('Resources (Slurm)');
    expect(
      waitingReason(
        job({
          state: 'PENDING',
          events: ['Scheduled', 'FailedScheduling: 0/4 nodes are available']
        })
      )
    ).toBe('FailedScheduling: 0/4 nodes are available');
    expect(waitingReason(job({ state: 'RUNNING' }))).toBeNull();
  });

  it('ends with the reason and the exit code', () => {
    expect(
      endedMessage(job({ state_reason: 'rank 1 exited with code 1' }))
    ).toBe('The job ended: FAILED (rank 1 exited with code 1).');
    expect(endedMessage(job({ exit_code: 137 }))).toBe(
      'The job ended: FAILED (exit code 137).'
    );
    expect(
      restartSummary(job({ ranks: [rank(0, { restarts: 2 }), rank(1)] }))
    ).toBe('Restarted 2 times (rank 0: 2).');
  });
});

describe('the notice of a job that ended', () => {
  it('says how it ended, with the reason of a failure', () => {
    expect(jobEndNotice(job({ state: 'SUCCEEDED' }))).toEqual({
      message: 'Job train succeeded.',
      type: 'success'
    });
    expect(jobEndNotice(job({ state: 'CANCELLED' })).type).toBe('info');
    expect(
      jobEndNotice(job({ state_reason: 'rank 1 exited with code 3' }))
    ).toEqual({
      message: 'Job train failed: rank 1 exited with code 3.',
      type: 'error'
    });
  });
});

describe('JobDiagnosis', () => {
  it('shows the reason and the last lines of the rank that failed first', async () => {
    const asked: [string, number, number][] = [];
    const client = {
      logs: async (id: string, r: number, tail: number) => {
        asked.push([id, r, tail]);
        return {
          rank: r,
          text: 'step 3\nTraceback (most recent call last):\nValueError: bad\n',
          start_offset: 0,
          offset: 10,
          truncated: true
        };
      }
    } as unknown as HyperpodClient;
    const failed = job({
      state_reason: 'rank 1 exited with code 1',
      ranks: [rank(0, { exit_code: -15 }), rank(1, { exit_code: 1 })]
    });
    render(
      <JobDiagnosis client={client} job={failed} onShowRank={jest.fn()} />
    );
    expect(screen.getByText(/Rank 1 failed first on node-1/)).toBeTruthy();
    expect(screen.getByText('rank 1 exited with code 1')).toBeTruthy();
    const lines = await screen.findByLabelText('Last lines of rank 1');
    expect(lines.textContent).toContain('ValueError: bad');
    expect(asked).toEqual([['train-abc123', 1, 15]]);
  });

  it('says why a job waits', () => {
    render(
      <JobDiagnosis
        client={{} as HyperpodClient}
        job={job({
          state: 'PENDING',
          state_reason: 'queued: 2 jobs ahead (local_max_parallel_jobs = 2)',
          ranks: []
        })}
      />
    );
    expect(screen.getByText(/Waiting: queued: 2 jobs ahead/)).toBeTruthy();
  });
});
