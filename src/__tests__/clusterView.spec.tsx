import { fireEvent, render, screen } from '@testing-library/react';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { ClusterView } from '../components/ClusterView';
import { ApiError } from '../handler';
import { HyperpodModel } from '../model';
import { DEFAULT_SETTINGS } from '../settings';
import { makeNode } from './fixtures';

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

  /** The Cluster view of a started model, its list of HyperPod clusters opened. */
  async function openClusterList(
    client: HyperpodClient
  ): Promise<HyperpodModel> {
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    model.start();
    render(<ClusterView model={model} />);
    fireEvent.click(
      await screen.findByRole('button', {
        name: 'Connect to a HyperPod cluster'
      })
    );
    return model;
  }

  it('lists clusters, disables Slurm ones and connects to EKS', async () => {
    const { client, connects } = awsClient();
    const model = await openClusterList(client);
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
    const model = await openClusterList(client);
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
    const model = await openClusterList(client);
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
    const model = await openClusterList(client);
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
