import {
  act,
  fireEvent,
  render,
  screen,
  waitFor
} from '@testing-library/react';
import * as React from 'react';

import { QueueClient, QueueView } from '../components/QueueView';
import { ApiError } from '../handler';
import { IJob, IQueueJob, IQueuePage, IQueueQuery } from '../models';

function row(overrides: Partial<IQueueJob>): IQueueJob {
  return {
    id: '1',
    name: 'job',
    user: 'bob',
    state: 'RUNNING',
    native_state: 'RUNNING',
    reason: null,
    position: null,
    explanation: null,
    nodes: 2,
    node_list: 'node[1-2]',
    gpus: 8,
    partition: 'debug',
    namespace: null,
    kind: null,
    priority: 100,
    priority_class: null,
    submitted: Date.now() / 1000 - 60,
    started: Date.now() / 1000 - 30,
    mine: false,
    job_id: null,
    adoptable: false,
    logs_readable: false,
    logs_reason: 'alice may not enter /home/bob (permissions)',
    log: null,
    ...overrides
  };
}

const THEIRS = row({ id: '11', name: 'bob-train', user: 'bob' });
const MINE = row({
  id: '12',
  name: 'alice-ft',
  user: 'alice',
  mine: true,
  adoptable: true,
  state: 'PENDING',
  native_state: 'PENDING',
  reason: 'Resources',
  position: 1,
  gpus: 1,
  nodes: 1,
  started: null,
  logs_readable: true,
  logs_reason: null,
  explanation:
    'Resources: 1st of 1 pending on debug; 1 running job(s) hold 2 nodes, 8 GPUs: 11 bob-train (bob, 2 nodes, 8 GPUs)'
});

function fakeClient(rows: IQueueJob[]) {
  const queries: IQueueQuery[] = [];
  const adopted: string[] = [];
  const client: QueueClient = {
    queue: async (query: IQueueQuery = {}): Promise<IQueuePage> => {
      queries.push(query);
      const kept = rows.filter(
        r =>
          (!query.mine || r.mine) &&
          (!query.state || query.state === 'all' || r.state === query.state)
      );
      const offset = query.offset ?? 0;
      return {
        jobs: kept.slice(offset, offset + (query.limit ?? 50)),
        total: kept.length,
        offset,
        limit: query.limit ?? 50,
        counts: { PENDING: 1, RUNNING: 1 },
        partitions: ['debug'],
        source: 'squeue --json',
        fetched: Date.now() / 1000
      };
    },
    adopt: async (id: string): Promise<IJob> => {
      adopted.push(id);
      return {
        id: `alice-ft-${id}`,
        name: 'alice-ft',
        state: 'PENDING'
      } as IJob;
    },
    queueLogs: async (id: string) => {
      if (id !== MINE.id) {
        throw new ApiError('not readable', 403, 'forbidden');
      }
      return { id, text: 'step 1 loss 0.5\n', truncated: false };
    }
  };
  return { client, queries, adopted };
}

describe('QueueView', () => {
  it('lists every user’s jobs, mine with actions and others read-only', async () => {
    const { client } = fakeClient([THEIRS, MINE]);
    render(
      <QueueView client={client} openJob={jest.fn()} cancelJob={jest.fn()} />
    );
    await screen.findByText('bob-train');
    const theirs = document.querySelector(
      '[data-queue-id="11"]'
    ) as HTMLElement;
    expect(theirs.textContent).toContain('read-only');
    expect(theirs.textContent).toContain('log not readable');
    expect(theirs.textContent).toContain('8 GPUs');
    expect(theirs.querySelector('button')).toBeNull();
    const mine = document.querySelector('[data-queue-id="12"]') as HTMLElement;
    expect(mine.textContent).toContain('1st of 1 pending on debug');
    expect(mine.textContent).toContain('Adopt and open');
    expect(screen.getByText(/1–2 of 2/)).toBeTruthy();
  });

  it('filters on the server and pages', async () => {
    const rows = Array.from({ length: 7 }, (_, i) =>
      row({ id: String(100 + i), name: `j${i}` })
    );
    const { client, queries } = fakeClient([...rows, MINE]);
    render(
      <QueueView
        client={client}
        openJob={jest.fn()}
        cancelJob={jest.fn()}
        pageSize={5}
      />
    );
    await screen.findByText('j0');
    fireEvent.click(screen.getByText('Next'));
    await screen.findByText('alice-ft');
    expect(queries[queries.length - 1]).toMatchObject({ offset: 5, limit: 5 });
    fireEvent.click(screen.getByLabelText('Mine'));
    await waitFor(() =>
      expect(queries[queries.length - 1]).toMatchObject({
        mine: true,
        offset: 0
      })
    );
    fireEvent.change(screen.getByLabelText('State'), {
      target: { value: 'all' }
    });
    await waitFor(() => expect(queries[queries.length - 1].state).toBe('all'));
  });

  it('adopts my job to open or cancel it, and shows a readable log', async () => {
    const { client, adopted } = fakeClient([THEIRS, MINE]);
    const openJob = jest.fn();
    const cancelJob = jest.fn();
    render(
      <QueueView client={client} openJob={openJob} cancelJob={cancelJob} />
    );
    await screen.findByText('alice-ft');
    await act(async () => {
      fireEvent.click(screen.getByText('Adopt and open'));
    });
    expect(adopted).toEqual(['12']);
    expect(openJob).toHaveBeenCalledWith(
      expect.objectContaining({ id: 'alice-ft-12' })
    );
    await act(async () => {
      fireEvent.click(screen.getByTitle('Cancel alice-ft (asks first)'));
    });
    expect(cancelJob).toHaveBeenCalledWith(
      expect.objectContaining({ id: 'alice-ft-12' })
    );
    fireEvent.click(screen.getByText('Log'));
    expect(
      (await screen.findByLabelText('Log of alice-ft')).textContent
    ).toContain('loss 0.5');
  });
});

describe('QueueView polling', () => {
  it('asks the server only while its tab is shown', async () => {
    jest.useFakeTimers();
    try {
      const { client, queries } = fakeClient([THEIRS]);
      const view = render(
        <QueueView
          client={client}
          openJob={jest.fn()}
          cancelJob={jest.fn()}
          refreshSeconds={1}
          active={false}
        />
      );
      await act(async () => {
        jest.advanceTimersByTime(3000);
      });
      expect(queries).toHaveLength(0);
      view.rerender(
        <QueueView
          client={client}
          openJob={jest.fn()}
          cancelJob={jest.fn()}
          refreshSeconds={1}
          active={true}
        />
      );
      await act(async () => {
        jest.advanceTimersByTime(2500);
      });
      expect(queries.length).toBeGreaterThanOrEqual(3);
    } finally {
      jest.useRealTimers();
    }
  });
});
