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
import { SubmitView } from '../components/SubmitView';
import { ApiError } from '../handler';
import { HyperpodModel } from '../model';
import { IJob, INode, ITemplateInfo, ITemplateSubmission } from '../models';
import { makeNode } from './fixtures';

const scriptTemplate: ITemplateInfo = {
  name: 'script',
  title: 'Run a script',
  description: 'Run a script',
  params: [
    {
      name: 'script',
      title: 'Script',
      type: 'path',
      required: true,
      default: null,
      description: '',
      choices: null,
      minimum: null,
      maximum: null,
      group: 'job',
      must_exist: false,
      program: false
    },
    {
      name: 'nodes',
      title: 'Nodes',
      type: 'integer',
      required: false,
      default: 1,
      description: '',
      choices: null,
      minimum: 1,
      maximum: 4096,
      group: 'resources',
      must_exist: false,
      program: false
    },
    {
      name: 'image',
      title: 'Container image',
      type: 'string',
      required: false,
      default: null,
      description: '',
      choices: null,
      minimum: null,
      maximum: null,
      group: 'advanced',
      must_exist: false,
      program: false
    }
  ]
};

/** A client double answering like the local cluster. */
function fakeClient(nodes: INode[] = []) {
  const submitted: ITemplateSubmission[] = [];
  const client = {
    cluster: async () => ({
      orchestrator: 'local',
      name: 'vm',
      user: 'me',
      filesystem: {
        partition: '/fs/shared',
        partition_mode: 'shared',
        contents_path: 'fs/shared'
      },
      capabilities: { cancel: true },
      default_template: 'script'
    }),
    nodes: async () => nodes,
    templates: async () => [scriptTemplate],
    files: async () => ({
      path: '',
      entries: [],
      total: 0,
      offset: 0,
      limit: 200,
      sort: 'name'
    }),
    render: async (body: ITemplateSubmission) => {
      if (Number(body.params?.nodes) > 1) {
        throw new ApiError(
          'the local cluster has one node: set nodes to 1',
          400,
          'invalid',
          'nodes'
        );
      }
      if (body.params?.image === 'bad') {
        throw new ApiError('no such image', 400, 'invalid', 'params.image');
      }
      return {
        format: 'command',
        language: 'shell',
        text: `python ${body.params?.script} # ${body.name}`,
        spec: {},
        warnings: [],
        values: {
          script: body.params?.script ?? null,
          nodes: body.params?.nodes ?? 1,
          image: body.params?.image ?? 'hyperpod:latest'
        }
      };
    },
    submit: async (body: ITemplateSubmission) => {
      submitted.push(body);
      return {
        id: `${body.name}-1`,
        name: body.name,
        state: 'PENDING'
      } as IJob;
    }
  };
  return { client: client as unknown as HyperpodClient, submitted };
}

describe('SubmitView', () => {
  it('previews, shows the server field errors next to the field, then submits', async () => {
    const { client, submitted } = fakeClient();
    const model = new HyperpodModel(client);
    await model.loadTemplates();
    const onSubmitted = jest.fn();
    render(<SubmitView model={model} onSubmitted={onSubmitted} />);
    act(() =>
      model.requestSubmit({
        template: 'script',
        params: { script: 'p/train.py' }
      })
    );

    const button = await screen.findByRole('button', { name: /Submit job/ });
    expect((screen.getByLabelText(/Script/) as HTMLInputElement).value).toBe(
      'p/train.py'
    );
    const name = (screen.getByLabelText(/Job name/) as HTMLInputElement).value;
    expect(name).toMatch(/^train-\d{4}-\d{6}$/);
    await screen.findByText(`python p/train.py # ${name}`, undefined, {
      timeout: 3000
    });
    expect((button as HTMLButtonElement).disabled).toBe(false);

    // A server message about a field shows under that field and blocks the submit button.
    fireEvent.change(screen.getByLabelText('Nodes'), {
      target: { value: '3' }
    });
    expect((button as HTMLButtonElement).disabled).toBe(true);
    const error = await screen.findByText(
      'the local cluster has one node: set nodes to 1',
      undefined,
      { timeout: 3000 }
    );
    expect(error.closest('[data-field]')?.getAttribute('data-field')).toBe(
      'nodes'
    );

    // A client-side check answers at once, before any request.
    fireEvent.change(screen.getByLabelText('Nodes'), {
      target: { value: '0' }
    });
    expect(screen.getByText('At least 1.')).toBeTruthy();

    fireEvent.change(screen.getByLabelText('Nodes'), {
      target: { value: '1' }
    });
    await waitFor(
      () => expect((button as HTMLButtonElement).disabled).toBe(false),
      { timeout: 3000 }
    );
    expect(screen.queryByText(/one node/)).toBeNull();

    fireEvent.click(button);
    await waitFor(() => expect(onSubmitted).toHaveBeenCalled());
    expect(submitted[0]).toEqual({
      name,
      template: 'script',
      params: { script: 'p/train.py', nodes: 1 }
    });
  });

  it('shows what the job will use, sends only what was set, then starts fresh', async () => {
    const { client, submitted } = fakeClient();
    const model = new HyperpodModel(client);
    await model.loadTemplates();
    render(<SubmitView model={model} onSubmitted={jest.fn()} />);
    act(() =>
      model.requestSubmit({
        template: 'script',
        params: { script: 'p/train.py', image: null }
      })
    );
    const button = await screen.findByRole('button', { name: /Submit job/ });
    const image = screen.getByLabelText('Container image') as HTMLInputElement;
    await waitFor(() => expect(image.placeholder).toBe('hyperpod:latest'), {
      timeout: 3000
    });
    expect(image.value).toBe('');
    await waitFor(
      () => expect((button as HTMLButtonElement).disabled).toBe(false),
      { timeout: 3000 }
    );
    const name = (screen.getByLabelText(/Job name/) as HTMLInputElement).value;
    fireEvent.click(button);
    await waitFor(() => expect(submitted).toHaveLength(1));
    // Nodes (untouched, default 1) and the image are left to the server.
    expect(submitted[0]).toEqual({
      name,
      template: 'script',
      params: { script: 'p/train.py' }
    });
    await waitFor(() =>
      expect((screen.getByLabelText(/Script/) as HTMLInputElement).value).toBe(
        ''
      )
    );
    expect(
      (screen.getByLabelText(/Job name/) as HTMLInputElement).value
    ).toMatch(/^script-\d{4}-\d{6}$/);
  });

  it('unfolds the advanced options when one of them is wrong', async () => {
    const { client } = fakeClient();
    const model = new HyperpodModel(client);
    await model.loadTemplates();
    const { container } = render(
      <SubmitView model={model} onSubmitted={jest.fn()} />
    );
    act(() =>
      model.requestSubmit({
        template: 'script',
        params: { script: 'x.py', image: 'bad' }
      })
    );
    await screen.findByText('no such image', undefined, { timeout: 3000 });
    expect(
      container
        .querySelector('details.jp-hyperpod-Advanced')
        ?.hasAttribute('open')
    ).toBe(true);
  });

  it('does not call a fresh required field an error before it is touched', async () => {
    const { client } = fakeClient();
    const model = new HyperpodModel(client);
    await model.loadTemplates();
    render(<SubmitView model={model} onSubmitted={jest.fn()} />);
    const script = await screen.findByLabelText(/Script/);
    expect(screen.queryByText('Script is required.')).toBeNull();
    expect(
      (screen.getByRole('button', { name: /Submit job/ }) as HTMLButtonElement)
        .disabled
    ).toBe(true);
    fireEvent.change(script, { target: { value: 'x' } });
    fireEvent.change(script, { target: { value: '' } });
    expect(screen.getByText('Script is required.')).toBeTruthy();
  });
});

describe('ClusterView', () => {
  it('draws a window of 2,000 nodes and filters them', async () => {
    const nodes = Array.from({ length: 2000 }, (_, i) => makeNode(i));
    const { client } = fakeClient(nodes);
    const model = new HyperpodModel(client);
    await (model as any)._refreshCluster();
    const { container } = render(<ClusterView model={model} />);
    expect(screen.getByText('2000 nodes')).toBeTruthy();
    const rows = container.querySelectorAll('.jp-hyperpod-NodeRow');
    expect(rows.length).toBeGreaterThan(5);
    expect(rows.length).toBeLessThan(60);
    const spacer = container.querySelector(
      '.jp-hyperpod-VirtualList-spacer'
    ) as HTMLElement;
    expect(spacer.style.height).toBe(`${2000 * 48}px`);

    fireEvent.change(screen.getByLabelText('Filter nodes by state'), {
      target: { value: 'drained' }
    });
    expect(screen.getByText('200 of 2000 nodes')).toBeTruthy();
    fireEvent.change(screen.getByLabelText('Filter nodes by name or type'), {
      target: { value: 'no-such-node' }
    });
    expect(screen.getByText('No node matches the filter.')).toBeTruthy();
  });

  it('keeps the last nodes on screen when the cluster becomes unreachable', async () => {
    const nodes = [makeNode(1)];
    const { client } = fakeClient(nodes);
    const model = new HyperpodModel(client);
    await (model as any)._refreshCluster();
    (client as any).nodes = async () => {
      throw new ApiError(
        'The cluster cannot be reached: sinfo timed out',
        503,
        'unreachable'
      );
    };
    await expect((model as any)._refreshCluster()).rejects.toThrow();
    render(<ClusterView model={model} />);
    expect(screen.getByRole('alert').textContent).toContain(
      'sinfo timed out Showing the last data received.'
    );
    expect(screen.getByText(nodes[0].name)).toBeTruthy();
  });
});
