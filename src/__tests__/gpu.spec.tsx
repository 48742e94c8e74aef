import { act, render, screen, waitFor } from '@testing-library/react';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { ClusterView } from '../components/ClusterView';
import {
  ClusterGpuSummary,
  JobGpuChart,
  NodeGpuBars
} from '../components/GpuBars';
import { alignSeries, gpuApiFor, IGpuNodes, IJobGpu, lastMean } from '../gpu';
import { HyperpodModel } from '../model';
import { DEFAULT_SETTINGS } from '../settings';
import { makeNode } from './fixtures';
import { plots } from './plotDouble';

jest.mock('uplot', () => require('./plotDouble').fakeUplot);

const FIGURES: IGpuNodes = {
  source: 'prometheus',
  time: 1_700_000_000,
  nodes: [
    {
      node: 'ip-10-1-0-1',
      utilization: 59,
      memory_used_mb: 43008,
      memory_total_mb: 163840,
      gpus: [
        {
          gpu: '0',
          utilization: 37,
          memory_used_mb: 2048,
          memory_total_mb: 81920,
          xid_error: 0
        },
        {
          gpu: '1',
          utilization: 81,
          memory_used_mb: 40960,
          memory_total_mb: 81920,
          xid_error: 79
        }
      ]
    }
  ]
};

describe('GPU figures', () => {
  it('aligns series on one time axis with gaps as null', () => {
    const aligned = alignSeries(
      [
        {
          metric: 'utilization',
          node: 'a',
          gpu: '0',
          points: [
            [1, 10],
            [2, 20]
          ]
        },
        {
          metric: 'utilization',
          node: 'b',
          gpu: '0',
          points: [
            [2, 30],
            [3, 40]
          ]
        },
        { metric: 'memory_used_mb', node: 'a', gpu: '0', points: [[1, 5]] }
      ],
      'utilization'
    );
    expect(aligned.data).toEqual([
      [1, 2, 3],
      [10, 20, null],
      [null, 30, 40]
    ]);
    expect(aligned.labels).toEqual(['a GPU 0', 'b GPU 0']);
    expect(
      lastMean(
        [
          {
            metric: 'utilization',
            gpu: '0',
            points: [
              [1, 10],
              [2, 20]
            ]
          },
          { metric: 'utilization', gpu: '1', points: [[2, 60]] }
        ],
        'utilization'
      )
    ).toBe(40);
  });

  it('shows a node bar per metric, the last XID, and nothing without figures', () => {
    const { container } = render(<NodeGpuBars node={FIGURES.nodes[0]} />);
    const util = screen.getByRole('meter', {
      name: 'GPU utilisation on ip-10-1-0-1'
    });
    expect(util.getAttribute('aria-valuenow')).toBe('59');
    const memory = screen.getByRole('meter', {
      name: 'GPU memory on ip-10-1-0-1'
    });
    expect(memory.textContent).toBe('mem 26%');
    expect(memory.getAttribute('title')).toContain(
      '42.0 GiB of 160.0 GiB GPU memory used'
    );
    expect(screen.getByText('XID 79')).toBeTruthy();
    expect(util.getAttribute('title')).toContain('GPU 1: 81%');
    const empty = render(<NodeGpuBars node={undefined} />);
    expect(empty.container.innerHTML).toBe('');
    expect(container.querySelectorAll('[role="meter"]').length).toBe(2);
  });

  it('summarises the cluster, says why a configured source shows nothing, is silent without one', () => {
    render(<ClusterGpuSummary figures={FIGURES} />);
    expect(screen.getByText('59% busy')).toBeTruthy();
    const failing = render(
      <ClusterGpuSummary
        figures={{
          source: 'amp',
          time: 0,
          nodes: [],
          message: 'AMP refused the credentials'
        }}
      />
    );
    expect(failing.container.textContent).toBe(
      'GPU metrics (amp): AMP refused the credentials'
    );
    const none = render(
      <ClusterGpuSummary
        figures={{
          source: null,
          time: 0,
          nodes: [],
          message: 'no NVIDIA GPU on this machine'
        }}
      />
    );
    expect(none.container.innerHTML).toBe('');
  });

  it('puts live bars on the Cluster view rows from gpu/nodes', async () => {
    let calls = 0;
    const client = {
      cluster: async () => ({
        orchestrator: 'slurm',
        name: 'ml',
        user: 'me',
        filesystem: { partition: '/fs/shared', partition_mode: 'shared' },
        capabilities: { cancel: true },
        details: {}
      }),
      nodes: async () => [makeNode(1), makeNode(2)],
      jobs: async () => ({ jobs: [], total: 0 }),
      templates: async () => [],
      gpuNodes: async () => {
        calls++;
        return FIGURES;
      },
      jobGpu: async () => ({ source: null, series: [] })
    } as unknown as HyperpodClient;
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    model.start();
    render(<ClusterView model={model} />);
    await screen.findByText('ip-10-1-0-1');
    expect(
      (
        await screen.findByRole('meter', {
          name: 'GPU utilisation on ip-10-1-0-1'
        })
      ).textContent
    ).toBe('GPU 59%');
    // The other node has no DCGM figures: no bar, only its allocation.
    expect(
      screen.queryByRole('meter', { name: 'GPU utilisation on ip-10-1-0-2' })
    ).toBeNull();
    expect(
      screen.getByRole('meter', { name: 'GPU utilisation in the cluster' })
    ).toBeTruthy();
    expect(calls).toBeGreaterThan(0);
    model.dispose();
  });

  it('charts a job’s GPU utilisation over time, one line per GPU', async () => {
    const answer: IJobGpu = {
      source: 'prometheus',
      start: 100,
      end: 130,
      step: 10,
      series: [
        {
          metric: 'utilization',
          node: 'n1',
          gpu: '0',
          points: [
            [100, 10],
            [110, 90],
            [120, 95]
          ]
        },
        {
          metric: 'utilization',
          node: 'n1',
          gpu: '1',
          points: [
            [100, 12],
            [110, 88],
            [120, 85]
          ]
        },
        {
          metric: 'memory_used_mb',
          node: 'n1',
          gpu: '0',
          points: [[100, 1000]]
        }
      ]
    };
    const api = {
      gpuNodes: async () => FIGURES,
      jobGpu: jest.fn(async () => answer)
    };
    plots.length = 0;
    render(
      <JobGpuChart
        api={api}
        jobId="train-a1b2c3"
        running={false}
        refreshInterval={10}
      />
    );
    expect(await screen.findByText('GPU utilisation')).toBeTruthy();
    expect(
      screen.getByText(/90% at the end · 2 GPUs · prometheus/)
    ).toBeTruthy();
    await waitFor(() => expect(plots.length).toBe(1));
    expect(plots[0].labels).toEqual(['GPU 0', 'GPU 1']);
    expect(plots[0].data).toEqual([
      [100, 110, 120],
      [10, 90, 95],
      [12, 88, 85]
    ]);
    expect(api.jobGpu).toHaveBeenCalledWith('train-a1b2c3');
  });

  it('shows nothing for a job where the cluster has no GPU metrics', async () => {
    const api = {
      gpuNodes: async () => FIGURES,
      jobGpu: async () => ({
        source: null,
        series: [],
        message: 'no GPU metrics: set …'
      })
    };
    const { container } = render(
      <JobGpuChart api={api} jobId="j-1" running={false} refreshInterval={10} />
    );
    await act(async () => {
      await Promise.resolve();
    });
    expect(container.innerHTML).toBe('');
    expect(gpuApiFor({})).toBeNull();
    expect(gpuApiFor(api)).toBe(api);
  });
});
