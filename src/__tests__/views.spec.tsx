import {
  act,
  fireEvent,
  render,
  screen,
  waitFor
} from '@testing-library/react';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { FilesView } from '../components/FilesView';
import { JobsView } from '../components/JobsView';
import { HyperpodModel } from '../model';
import { FileSort, IFileEntry, IJob } from '../models';
import { DEFAULT_SETTINGS } from '../settings';

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
