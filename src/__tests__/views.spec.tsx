import {
  act,
  fireEvent,
  render,
  screen,
  waitFor
} from '@testing-library/react';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { ClusterView } from '../components/ClusterView';
import { FilesView } from '../components/FilesView';
import { JobsView } from '../components/JobsView';
import { ApiError } from '../handler';
import { HyperpodModel } from '../model';
import { FileSort, IFileEntry, IJob } from '../models';
import { DEFAULT_SETTINGS } from '../settings';
import { makeNode } from './fixtures';

/** A directory of `total` files (every 50th a script), served page by page. */
function filesClient(total: number) {
  const calls: {
    path: string;
    offset?: number;
    limit?: number;
    sort?: FileSort;
  }[] = [];
  const client = {
    files: async (
      path: string,
      options: { offset?: number; limit?: number; sort?: FileSort }
    ) => {
      calls.push({ path, ...options });
      const offset = options.offset ?? 0;
      const limit = options.limit ?? 200;
      const entries: IFileEntry[] = [];
      for (let i = offset; i < Math.min(total, offset + limit); i++) {
        entries.push({
          name: i === 0 ? 'sub' : i % 50 === 0 ? `run${i}.py` : `file${i}.txt`,
          type: i === 0 ? 'directory' : 'file',
          size: 1536 * i,
          mtime: 1_700_000_000
        });
      }
      return {
        path,
        entries,
        total,
        offset,
        limit,
        sort: options.sort ?? 'name'
      };
    }
  };
  return { client: client as unknown as HyperpodClient, calls };
}

describe('FilesView', () => {
  it('pages through a huge directory, sorts, opens folders and submits scripts', async () => {
    const { client, calls } = filesClient(450);
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    const openFile = jest.fn();
    const submitFile = jest.fn();
    render(
      <FilesView model={model} openFile={openFile} submitFile={submitFile} />
    );

    await screen.findByText('1–200 of 450');
    expect(screen.getByText('1.5 KB')).toBeTruthy();
    fireEvent.click(screen.getByTitle('Next page'));
    await screen.findByText('201–400 of 450');
    expect(calls[calls.length - 1]).toEqual({
      path: '',
      offset: 200,
      limit: 200,
      sort: 'name'
    });

    fireEvent.click(screen.getByRole('columnheader', { name: /Size/ }));
    await waitFor(() => expect(calls[calls.length - 1].sort).toBe('size'));
    expect(calls[calls.length - 1].offset).toBe(0);
    fireEvent.click(screen.getByRole('columnheader', { name: /Size/ }));
    await waitFor(() => expect(calls[calls.length - 1].sort).toBe('-size'));

    fireEvent.click(await screen.findByTitle('Submit run50.py as a job'));
    expect(submitFile).toHaveBeenCalledWith('run50.py');
    fireEvent.click(screen.getByTitle('Open file1.txt in JupyterLab'));
    expect(openFile).toHaveBeenCalledWith('file1.txt');

    fireEvent.click(screen.getByTitle('Open folder sub'));
    await waitFor(() => expect(calls[calls.length - 1].path).toBe('sub'));
    expect(
      screen.getByRole('button', { name: 'sub' }).getAttribute('aria-current')
    ).toBe('location');
  });

  it('says when files cannot be opened here', async () => {
    const { client } = filesClient(3);
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    render(<FilesView model={model} submitFile={jest.fn()} />);
    await screen.findByText('3 items');
    expect(
      screen.getByText(/not under the Jupyter server's root/)
    ).toBeTruthy();
  });

  it("shows the server's note on entries it could not list", async () => {
    const { client } = filesClient(2);
    const files = client.files.bind(client);
    (client as unknown as { files: typeof files }).files = async (
      path,
      options
    ) => ({
      ...(await files(path, options)),
      skipped: 1,
      note: '1 entry not shown: the name is not valid UTF-8'
    });
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    render(<FilesView model={model} submitFile={jest.fn()} />);
    expect((await screen.findByRole('note')).textContent).toContain(
      'not valid UTF-8'
    );
  });
});

describe('JobsView', () => {
  const job = (name: string, state: IJob['state']): IJob =>
    ({
      id: `${name}-1`,
      name,
      state,
      created: Date.now() / 1000 - 300,
      started: null,
      ended: null,
      exit_code: state === 'FAILED' ? 3 : null,
      backend_id: null,
      state_reason: null,
      spec: {
        name,
        command: ['x.py'],
        nodes: 2,
        procs_per_node: 4,
        gpus_per_node: 4
      }
    }) as IJob;

  it('offers cancel only for active jobs, and filters by name', () => {
    const model = new HyperpodModel({} as HyperpodClient, DEFAULT_SETTINGS);
    model.upsertJob(job('done', 'FAILED'));
    model.upsertJob(job('train', 'RUNNING'));
    const cancelJob = jest.fn();
    const resubmitJob = jest.fn();
    render(
      <JobsView
        model={model}
        openJob={jest.fn()}
        cancelJob={cancelJob}
        resubmitJob={resubmitJob}
      />
    );
    expect(screen.getAllByText('2 nodes · 8 ranks · 8 GPUs')).toHaveLength(2);
    expect(screen.queryByTitle('Cancel done')).toBeNull();
    fireEvent.click(screen.getByTitle('Cancel train'));
    expect(cancelJob).toHaveBeenCalledWith(
      expect.objectContaining({ name: 'train' })
    );
    fireEvent.click(
      screen.getByTitle('Resubmit done (opens the form prefilled)')
    );
    expect(resubmitJob).toHaveBeenCalledWith(
      expect.objectContaining({ name: 'done' })
    );
    expect(screen.getByText('exit 3')).toBeTruthy();
    expect(screen.getAllByText('5m ago')).toHaveLength(2);

    fireEvent.change(screen.getByLabelText('Filter jobs by name'), {
      target: { value: 'tra' }
    });
    expect(screen.queryByText('done')).toBeNull();
    expect(screen.getByText('train')).toBeTruthy();
  });
});

describe('JobsView: progress, bulk actions', () => {
  const job = (name: string, state: IJob['state'], extra = {}): IJob =>
    ({
      id: `${name}-1`,
      name,
      state,
      created: Date.now() / 1000 - 60,
      started: null,
      ended: null,
      exit_code: null,
      backend_id: null,
      state_reason: null,
      spec: { name, command: ['x.py'] },
      ...extra
    }) as IJob;

  it('shows progress and ETA of running jobs, and why pending ones wait', () => {
    const model = new HyperpodModel({} as HyperpodClient, DEFAULT_SETTINGS);
    model.upsertJob(
      job('train', 'RUNNING', {
        progress: {
          step: 12,
          total: 50,
          fraction: 0.24,
          elapsed_seconds: 60,
          eta_seconds: 190,
          loss: 0.81234,
          source: 'training'
        }
      })
    );
    model.upsertJob(
      job('wait', 'PENDING', { state_reason: 'Resources (Slurm)' })
    );
    render(
      <JobsView
        model={model}
        openJob={jest.fn()}
        cancelJob={jest.fn()}
        resubmitJob={jest.fn()}
      />
    );
    const bar = screen.getByRole('progressbar');
    expect(bar.getAttribute('aria-valuenow')).toBe('12');
    expect(bar.textContent).toBe('step 12/50 · 24% · ETA 3m 10s · loss 0.812');
    expect(screen.getByText('Resources (Slurm)')).toBeTruthy();
  });

  it('selects jobs to cancel or remove together', () => {
    const model = new HyperpodModel({} as HyperpodClient, DEFAULT_SETTINGS);
    model.upsertJob(job('a', 'RUNNING'));
    model.upsertJob(job('b', 'FAILED'));
    model.upsertJob(job('c', 'SUCCEEDED'));
    const cancelJobs = jest.fn();
    const removeJobs = jest.fn();
    render(
      <JobsView
        model={model}
        openJob={jest.fn()}
        cancelJob={jest.fn()}
        resubmitJob={jest.fn()}
        cancelJobs={cancelJobs}
        removeJobs={removeJobs}
      />
    );
    fireEvent.click(screen.getByLabelText('Select a'));
    fireEvent.click(screen.getByLabelText('Select b'));
    expect(screen.getByText('2 selected')).toBeTruthy();
    fireEvent.click(screen.getByRole('button', { name: 'Cancel 1' }));
    expect(cancelJobs.mock.calls[0][0].map((j: IJob) => j.name)).toEqual(['a']);
    fireEvent.click(screen.getByRole('button', { name: 'Remove 2' }));
    expect(removeJobs.mock.calls[0][0].map((j: IJob) => j.name).sort()).toEqual(
      ['a', 'b']
    );
    fireEvent.click(screen.getByLabelText('Select all jobs shown'));
    expect(screen.getByText('3 selected')).toBeTruthy();
    fireEvent.click(screen.getByTitle('Remove c from the history'));
    expect(removeJobs.mock.calls[1][0].map((j: IJob) => j.name)).toEqual(['c']);
    act(() => model.removeJob('c-1'));
    expect(screen.queryByText('c')).toBeNull();
  });
});

describe('ClusterView: connect to a HyperPod cluster', () => {
  const info = (orchestrator: string, name: string, awsConnect = true) => ({
    orchestrator,
    name,
    user: 'me',
    filesystem: { partition: '/fs/shared', partition_mode: 'shared' },
    capabilities: { cancel: true, aws_connect: awsConnect },
    details: {}
  });

  function awsClient(connectError: ApiError | null = null) {
    let connected = false;
    const connects: unknown[] = [];
    const client = {
      cluster: async () =>
        connected ? info('kubernetes', 'ml-cluster') : info('local', 'vm'),
      nodes: async () =>
        connected ? [{ ...makeNode(1), name: 'hyperpod-i-00001' }] : [],
      jobs: async () => ({ jobs: [], total: 0, offset: 0, limit: 50 }),
      templates: async () => [],
      awsClusters: async () => ({
        region: 'us-east-1',
        clusters: [
          {
            name: 'ml-cluster',
            arn: 'arn:aws:sagemaker:us-east-1:1:cluster/abc',
            status: 'InService',
            orchestrator: 'eks',
            eks_cluster_arn: 'arn:aws:eks:us-east-1:1:cluster/eks',
            connectable: true,
            reason: null
          },
          {
            name: 'slurm-cluster',
            arn: 'arn:aws:sagemaker:us-east-1:1:cluster/def',
            status: 'InService',
            orchestrator: 'slurm',
            eks_cluster_arn: null,
            connectable: false,
            reason: 'orchestrated by Slurm: use the slurm orchestrator'
          }
        ]
      }),
      awsConnect: async (request: unknown) => {
        connects.push(request);
        if (connectError) {
          throw connectError;
        }
        connected = true;
        return info('kubernetes', 'ml-cluster');
      }
    };
    return { client: client as unknown as HyperpodClient, connects };
  }

  it('lists clusters, disables Slurm ones and connects to EKS', async () => {
    const { client, connects } = awsClient();
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    model.start();
    render(<ClusterView model={model} />);
    fireEvent.click(
      await screen.findByRole('button', {
        name: 'Connect to a HyperPod cluster'
      })
    );
    const slurm = await screen.findByRole('button', {
      name: 'Connect to slurm-cluster'
    });
    expect((slurm as HTMLButtonElement).disabled).toBe(true);
    expect(screen.getByText(/orchestrated by Slurm/)).toBeTruthy();
    expect(screen.getByText('eks · InService')).toBeTruthy();
    fireEvent.click(
      screen.getByRole('button', { name: 'Connect to ml-cluster' })
    );
    expect(await screen.findByText('Connecting to ml-cluster…')).toBeTruthy();
    await screen.findByText('hyperpod-i-00001');
    expect(connects).toEqual([
      {
        cluster: 'arn:aws:sagemaker:us-east-1:1:cluster/abc',
        region: 'us-east-1'
      }
    ]);
    expect(model.cluster?.orchestrator).toBe('kubernetes');
    expect(screen.getByText('kubernetes')).toBeTruthy();
    model.dispose();
  });

  it('sets up a login node of a Slurm cluster', async () => {
    const { client, connects } = awsClient();
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    model.start();
    render(<ClusterView model={model} />);
    fireEvent.click(
      await screen.findByRole('button', {
        name: 'Connect to a HyperPod cluster'
      })
    );
    const setup = await screen.findByRole('button', {
      name: 'Set up a login node of slurm-cluster'
    });
    expect(
      screen.queryByRole('button', {
        name: 'Set up a login node of ml-cluster'
      })
    ).toBeNull();
    fireEvent.click(setup);
    expect(
      await screen.findByText('Connecting to slurm-cluster…')
    ).toBeTruthy();
    await screen.findByText('hyperpod-i-00001');
    expect(connects).toEqual([
      {
        cluster: 'arn:aws:sagemaker:us-east-1:1:cluster/def',
        region: 'us-east-1',
        slurm: true
      }
    ]);
    model.dispose();
  });

  it('shows the server error next to the control', async () => {
    const { client } = awsClient(
      new ApiError('AWS denied eks:DescribeCluster', 403, 'aws_denied')
    );
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    model.start();
    render(<ClusterView model={model} />);
    fireEvent.click(
      await screen.findByRole('button', {
        name: 'Connect to a HyperPod cluster'
      })
    );
    fireEvent.click(
      await screen.findByRole('button', { name: 'Connect to ml-cluster' })
    );
    expect((await screen.findByRole('alert')).textContent).toContain(
      'AWS denied eks:DescribeCluster'
    );
    expect(model.cluster?.orchestrator).toBe('local');
    model.dispose();
  });

  it('asks for the region when the server knows none, then lists it', async () => {
    const { client } = awsClient();
    const asked: (string | undefined)[] = [];
    const list = (client as any).awsClusters;
    (client as any).awsClusters = async (region?: string) => {
      asked.push(region);
      if (!region) {
        throw new ApiError(
          'no AWS region: pass region, set AWS_REGION',
          400,
          'invalid_request',
          'region'
        );
      }
      return { ...(await list()), region };
    };
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    model.start();
    render(<ClusterView model={model} />);
    fireEvent.click(
      await screen.findByRole('button', {
        name: 'Connect to a HyperPod cluster'
      })
    );
    expect((await screen.findByRole('alert')).textContent).toContain(
      'enter one above'
    );
    fireEvent.change(screen.getByLabelText('AWS region'), {
      target: { value: 'eu-west-1' }
    });
    fireEvent.click(screen.getByRole('button', { name: 'List clusters' }));
    expect(
      await screen.findByRole('list', {
        name: 'HyperPod clusters in eu-west-1'
      })
    ).toBeTruthy();
    expect(asked).toEqual([undefined, 'eu-west-1']);
    model.dispose();
  });

  it('hides the action when the server cannot reach AWS', async () => {
    const { client } = awsClient();
    (client as any).cluster = async () => info('local', 'vm', false);
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    model.start();
    render(<ClusterView model={model} />);
    await screen.findByText('vm');
    expect(
      screen.queryByRole('button', { name: 'Connect to a HyperPod cluster' })
    ).toBeNull();
    model.dispose();
  });
});
