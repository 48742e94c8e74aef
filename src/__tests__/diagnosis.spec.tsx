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
    ended: null,
    faults: [],
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
  it("shows the server's decision, never its own reading of the ranks or the reason", () => {
    // core/blame.py decides (tests/test_blame.py holds the cases); the panel displays it.
    const failed = job({
      state_reason: 'rank 2 exited with code 1',
      ranks: [rank(0, { exit_code: 143 }), rank(1, { exit_code: 3 })],
      failed_rank: 1
    });
    expect(failedRank(failed)).toBe(1);
    expect(failedRank(job({ failed_rank: null }))).toBeNull();
    expect(failedRank(job({}))).toBeNull();
  });

  it('lists the restarts and the fault the job failed on', () => {
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
      ranks: [rank(0, { exit_code: -15 }), rank(1, { exit_code: 1 })],
      failed_rank: 1
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
