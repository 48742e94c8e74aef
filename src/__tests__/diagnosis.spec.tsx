import { render, screen } from '@testing-library/react';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { JobDiagnosis } from '../components/JobDiagnosis';
import {
  endedMessage,
  failedRank,
  jobEndNotice,
  restartHistory,
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

  it('takes the failed rank that ended first, where the backend knows when', () => {
    // The reason names rank 2 (the launcher saw it first in its poll), but rank 1 ended first.
    expect(
      failedRank(
        job({
          state_reason: 'rank 2 exited with code 1',
          ranks: [
            rank(0, { exit_code: 143, ended: 10.2 }),
            rank(1, { exit_code: 3, ended: 10.0 }),
            rank(2, { exit_code: 1, ended: 10.1 })
          ],
          spec: { name: 't', command: ['t.py'], nodes: 1, procs_per_node: 3 }
        } as Partial<IJob>)
      )
    ).toBe(1);
    // A tie goes to the rank that failed on its own, not one the launcher stopped.
    expect(
      failedRank(
        job({
          ranks: [
            rank(0, { exit_code: -15, ended: 5 }),
            rank(1, { exit_code: 2, ended: 5 })
          ]
        })
      )
    ).toBe(1);
  });

  it('takes the recorded rank on Slurm, where ranks srun killed have no end', () => {
    // The ranks of tests/slurm/test_rank_ends.py's job: rank 2 failed, torchrun stopped rank 3
    // after it, srun's --kill-on-bad-exit killed rank 0 and 1 (no record). The end times alone
    // say rank 2 (the backend's reason names it too); without them, rank 0 would be blamed.
    expect(
      failedRank(
        job({
          orchestrator: 'slurm',
          state_reason: 'FAILED (NonZeroExitCode)',
          ranks: [
            rank(0, { state: 'FAILED', exit_code: null }),
            rank(1, { state: 'FAILED', exit_code: null }),
            rank(2, { state: 'FAILED', exit_code: 3, ended: 98.8 }),
            rank(3, { state: 'FAILED', exit_code: 143, ended: 98.9 })
          ],
          spec: { name: 't', command: ['t.py'], nodes: 2, procs_per_node: 2 }
        } as Partial<IJob>)
      )
    ).toBe(2);
  });

  it('takes the rank HyperPod says the job failed on', () => {
    const fault = (restart: number | null) => ({
      restart,
      restart_type: 'JLR',
      pod: 'train-pods-1',
      node: 'i-0abc'
    });
    const failed = job({
      state_reason:
        'rank 1 (train-pods-1 on i-0abc) faulty: failed after 1 restart(s).',
      ranks: [
        rank(0, { exit_code: 1, ended: 1 }),
        rank(1, { exit_code: 1, ended: 2, faults: [fault(1), fault(null)] })
      ]
    });
    expect(failedRank(failed)).toBe(1);
    expect(restartHistory(failed)).toEqual([
      'Restart 1 (job-level restart): rank 1 (train-pods-1 on i-0abc) faulty.',
      'Failed on: rank 1 (train-pods-1 on i-0abc) faulty.'
    ]);
    expect(restartHistory(job({}))).toEqual([]);
    // Slurm's, from the ranks' own records: no restart type, no pod.
    const slurm = (restart: number | null) => ({
      restart,
      restart_type: null,
      pod: null,
      node: 'node1'
    });
    expect(
      restartHistory(
        job({
          orchestrator: 'slurm',
          ranks: [
            rank(0, { restarts: 1, faults: [slurm(null)] }),
            rank(1, { restarts: 1, faults: [slurm(1)] })
          ]
        })
      )
    ).toEqual([
      'Restart 1: rank 1 (on node1) faulty.',
      'Failed on: rank 0 (on node1) faulty.'
    ]);
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

  it('lists the restart history of a running job', () => {
    render(
      <JobDiagnosis
        client={{} as HyperpodClient}
        job={job({
          state: 'RUNNING',
          ranks: [
            rank(0, { restarts: 1 }),
            rank(1, {
              restarts: 1,
              faults: [
                { restart: 1, restart_type: 'PLR', pod: 'p-1', node: null }
              ]
            })
          ]
        })}
      />
    );
    const history = screen.getByLabelText('Restart history');
    expect(history.textContent).toBe(
      'Restart 1 (process-level restart): rank 1 (p-1) faulty.'
    );
    expect(screen.getByText(/Restarted 1 time/)).toBeTruthy();
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
