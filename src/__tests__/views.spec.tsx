import { fireEvent, render, screen, waitFor } from '@testing-library/react';
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
