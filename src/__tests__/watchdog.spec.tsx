import { fireEvent, render, screen, waitFor } from '@testing-library/react';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { StacksTable, WatchdogBanner } from '../components/WatchdogBanner';
import { HyperpodModel } from '../model';
import { IJob, IJobWatchdog, IStackDump } from '../models';
import {
  operatorVerdictLine,
  stackRows,
  stallNotice,
  suspectNodes,
  watchdogLine
} from '../watchdog';
import { makeJob } from './fixtures';

const base: IJob = makeJob({
  id: 'hang-1',
  name: 'hang',
  orchestrator: 'slurm',
  backend_id: '12'
});

const stalled: IJobWatchdog = {
  stalled_since: 1_700_000_000,
  stalled_detail: 'no new step on any rank for 31 s (bound 30.0 s)',
  bound_seconds: 30,
  stopped_first: [
    {
      rank: 1,
      node: 'node-b',
      step: 4,
      last_step_at: 1,
      step_seconds: 0.2,
      rate: 0
    }
  ],
  stragglers: [],
  ranks: [],
  auto_cancel_at: null
};

const dump: IStackDump = {
  job_id: 'hang-1',
  taken_at: 3,
  ranks: [
    {
      rank: 0,
      node: 'node-a',
      pid: 10,
      error: null,
      fix: null,
      threads: [
        {
          name: 'MainThread',
          thread_id: 1,
          active: false,
          frames: [
            {
              name: 'all_reduce',
              filename: 'distributed.py',
              line: 9,
              differs: true
            },
            { name: 'main', filename: 'train.py', line: 30, differs: true },
            { name: '<module>', filename: 'train.py', line: 40, differs: false }
          ]
        }
      ]
    },
    {
      rank: 1,
      node: 'node-b',
      pid: 11,
      error: null,
      fix: null,
      threads: [
        {
          name: 'MainThread',
          thread_id: 2,
          active: false,
          frames: [
            {
              name: 'sleep_before_all_reduce',
              filename: 'train.py',
              line: 20,
              differs: true
            },
            { name: 'main', filename: 'train.py', line: 28, differs: true },
            { name: '<module>', filename: 'train.py', line: 40, differs: false }
          ]
        }
      ]
    }
  ]
};

describe('watchdog', () => {
  it('words a stall and its suspects, and nothing for a healthy job', () => {
    const job = { ...base, watchdog: stalled };
    expect(watchdogLine(job)).toMatch(
      /^stalled since .+ \(stopped first: rank 1 on node-b at step 4\)$/
    );
    expect(suspectNodes(job)).toEqual(['node-b']);
    expect(stallNotice(job)).toMatch(/^Job hang stalled: stalled since/);
    expect(watchdogLine(base)).toBeNull();
    expect(
      watchdogLine({
        ...base,
        watchdog: { ...stalled, stalled_since: null, stopped_first: [] }
      })
    ).toBeNull();
    expect(watchdogLine({ ...job, state: 'SUCCEEDED' })).toBeNull();
  });

  it("words the cluster operator's verdict in any state, and nothing without one", () => {
    const verdict = {
      state: 'HANGING' as const,
      rule: 'hyperpod-watchdog-hang',
      reason: 'LogHang_hyperpod-watchdog-hang',
      message: 'rank 1: step 4/1000',
      at: 1_700_000_000,
      action: 'failed the job',
      ranks: [1],
      nodes: ['i-0abc']
    };
    const failed = {
      ...base,
      state: 'FAILED' as const,
      operator_verdict: verdict
    };
    expect(operatorVerdictLine(failed)).toMatch(
      /^HyperPod: HANGING \(rule hyperpod-watchdog-hang\) at .+, failed the job \[rank 1, on i-0abc\]$/
    );
    expect(
      operatorVerdictLine({
        ...failed,
        operator_verdict: { ...verdict, at: null, ranks: [], nodes: [] }
      })
    ).toBe('HyperPod: HANGING (rule hyperpod-watchdog-hang), failed the job');
    expect(operatorVerdictLine(base)).toBeNull();
  });

  it('names stragglers with their nodes', () => {
    const job = {
      ...base,
      watchdog: {
        ...stalled,
        stalled_since: null,
        stragglers: [
          { rank: 3, node: 'node-c', rate: 1, others_rate: 3, windows: 3 }
        ]
      }
    };
    expect(watchdogLine(job)).toBe(
      'straggler: rank 3 on node-c, 1.0 steps/s vs 3.0'
    );
  });

  it('lays the stacks side by side, outermost first, differing frames marked', () => {
    const rows = stackRows(dump);
    expect(rows.map(r => r.map(f => f?.name))).toEqual([
      ['<module>', '<module>'],
      ['main', 'main'],
      ['all_reduce', 'sleep_before_all_reduce']
    ]);
    render(<StacksTable dump={dump} />);
    const cell = screen.getByText('sleep_before_all_reduce (train.py:20)');
    expect(cell.className).toContain('jp-hyperpod-Stacks-differs');
    const same = screen.getAllByText('<module> (train.py:40)', {
      selector: 'td'
    });
    expect(same.map(td => td.className)).toEqual(['', '']);
  });

  it('offers cancel, resubmit without the suspect node and a stack dump', async () => {
    const client = {
      dumpStacks: jest.fn().mockResolvedValue(dump)
    } as unknown as HyperpodClient;
    const cancelJob = jest.fn();
    const resubmitJob = jest.fn();
    const job = { ...base, watchdog: stalled };
    render(
      <WatchdogBanner
        client={client}
        job={job}
        cancelJob={cancelJob}
        resubmitJob={resubmitJob}
      />
    );
    expect(screen.getByRole('alert').textContent).toContain('stalled since');
    fireEvent.click(screen.getByText('Cancel'));
    expect(cancelJob).toHaveBeenCalledWith(job);
    fireEvent.click(screen.getByText('Resubmit without node-b'));
    expect(resubmitJob).toHaveBeenCalledWith(job, ['node-b']);
    fireEvent.click(screen.getByText('Dump stacks'));
    await waitFor(() =>
      screen.getByText('sleep_before_all_reduce (train.py:20)')
    );
    expect(client.dumpStacks).toHaveBeenCalledWith('hang-1');
  });

  it('the model signals a stall once per stall', () => {
    const model = new HyperpodModel({} as HyperpodClient);
    const seen: string[] = [];
    model.jobStalled.connect((_, job) => seen.push(job.id));
    const track = (job: IJob) =>
      (model as unknown as { _track(jobs: IJob[]): void })._track([job]);
    track(base);
    track({ ...base, watchdog: stalled });
    track({ ...base, watchdog: stalled });
    track({ ...base, watchdog: { ...stalled, stalled_since: null } });
    track({ ...base, watchdog: stalled });
    expect(seen).toEqual(['hang-1', 'hang-1']);
    model.dispose();
  });
});
