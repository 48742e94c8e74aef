import { fireEvent, render, screen, waitFor } from '@testing-library/react';
import * as React from 'react';

import {
  afterLine,
  canResume,
  choiceLabel,
  runAfterChoices,
  waitingLine
} from '../chains';
import { ChainClient, ChainView } from '../components/ChainView';
import { RunAfterField } from '../components/submit/RunAfterField';
import { fieldForError, toSubmission } from '../form';
import { IJob, IJobChain, ITemplateInfo } from '../models';
import { freshForm, submitReducer, INITIAL_SUBMIT_STATE } from '../submitState';
import { makeJob, makeSpec } from './fixtures';

const TEMPLATE: ITemplateInfo = {
  name: 'script',
  title: 'Script',
  description: '',
  params: []
};

function chainOf(failed: string | null): IJobChain {
  return {
    job_id: 'train-2',
    failed,
    links: [
      {
        id: 'prep-1',
        name: 'prep',
        state: 'SUCCEEDED',
        state_reason: null,
        held: null,
        after: [],
        after_any: false,
        created: 1
      },
      {
        id: 'train-2',
        name: 'train',
        state: 'FAILED',
        state_reason: 'rank 0 exited with code 3',
        held: null,
        after: ['prep-1'],
        after_any: false,
        created: 2
      },
      {
        id: 'eval-3',
        name: 'eval',
        state: 'CANCELLED',
        state_reason: 'train failed: rank 0 exited with code 3 (train-2)',
        held: null,
        after: ['train-2'],
        after_any: false,
        created: 3
      }
    ]
  };
}

describe('chains in words', () => {
  it('offers the jobs that can still succeed, newest first as listed', () => {
    const jobs = [
      makeJob({ id: 'a', state: 'RUNNING' }),
      makeJob({ id: 'b', state: 'FAILED' }),
      makeJob({ id: 'c', state: 'SUCCEEDED' }),
      makeJob({ id: 'd', state: 'CANCELLED' }),
      makeJob({ id: 'e', state: 'PENDING' })
    ];
    expect(runAfterChoices(jobs).map(job => job.id)).toEqual(['a', 'c', 'e']);
    expect(runAfterChoices(null)).toEqual([]);
    expect(choiceLabel(jobs[0])).toBe('job (a) · RUNNING');
  });

  it("says what a job waits for: the server's hold, else the cluster's", () => {
    const held = makeJob({
      state: 'PENDING',
      held: 'waiting for prep-1 (prep)'
    });
    expect(waitingLine(held)).toBe('waiting for prep-1 (prep)');
    const onSlurm = makeJob({
      state: 'PENDING',
      spec: makeSpec({ after: ['prep-1', 'tok-2'] })
    });
    expect(waitingLine(onSlurm)).toBe(
      'waiting for prep-1, tok-2 (held by the cluster)'
    );
    expect(waitingLine(makeJob({ state: 'RUNNING' }))).toBeNull();
    expect(afterLine(['a', 'b'], true)).toBe('after a, b (any end)');
    expect(afterLine([], false)).toBe('');
  });

  it('offers a resume only on the link that failed first', () => {
    const chain = chainOf('train-2');
    expect(canResume(chain, makeJob({ id: 'train-2', state: 'FAILED' }))).toBe(
      true
    );
    expect(
      canResume(chain, makeJob({ id: 'eval-3', state: 'CANCELLED' }))
    ).toBe(false);
    expect(canResume(null, makeJob({ id: 'train-2', state: 'FAILED' }))).toBe(
      false
    );
  });
});

describe('Run after in the Submit form', () => {
  it('sends the picked jobs as the spec after (in overrides) and maps its errors', () => {
    let state = submitReducer(INITIAL_SUBMIT_STATE, {
      type: 'start',
      template: TEMPLATE
    });
    expect(toSubmission(TEMPLATE, state.form!).overrides).toBeUndefined();
    state = submitReducer(state, {
      type: 'after',
      after: ['prep-1', 'tok-2'],
      afterAny: true
    });
    expect(toSubmission(TEMPLATE, state.form!).overrides).toEqual({
      after: ['prep-1', 'tok-2'],
      after_any: true
    });
    state = submitReducer(state, { type: 'after', after: [], afterAny: true });
    expect(toSubmission(TEMPLATE, state.form!).overrides).toBeUndefined();
    expect(fieldForError('after', TEMPLATE)).toBe('after');
    expect(freshForm(TEMPLATE).after).toBeUndefined();
  });

  it('lists the jobs to pick and reports the picks', () => {
    const jobs: IJob[] = [
      makeJob({ id: 'prep-1', name: 'prep', state: 'RUNNING' }),
      makeJob({ id: 'bad-2', name: 'bad', state: 'FAILED' })
    ];
    const picks: [string[], boolean][] = [];
    const { rerender } = render(
      <RunAfterField
        jobs={jobs}
        after={[]}
        afterAny={false}
        onChange={(after, any) => picks.push([after, any])}
      />
    );
    const select = screen.getByLabelText('Run after') as HTMLSelectElement;
    expect(Array.from(select.options).map(o => o.textContent)).toEqual([
      'prep (prep-1) · RUNNING'
    ]);
    select.options[0].selected = true;
    fireEvent.change(select);
    expect(picks).toEqual([[['prep-1'], false]]);
    rerender(
      <RunAfterField
        jobs={jobs}
        after={['prep-1']}
        afterAny={false}
        error="after: job 'x' is not yours"
        onChange={(after, any) => picks.push([after, any])}
      />
    );
    fireEvent.click(screen.getByLabelText(/Start even if they fail/));
    expect(picks[1]).toEqual([['prep-1'], true]);
    expect(screen.getByRole('alert').textContent).toContain('is not yours');
  });
});

describe('ChainView', () => {
  function client(chain: IJobChain) {
    const asked: string[] = [];
    const fake: ChainClient = {
      chain: async (id: string) => {
        asked.push(`chain ${id}`);
        return chain;
      },
      resume: async (id: string, withChanges?: boolean) => {
        asked.push(`resume ${id} ${withChanges}`);
        return { jobs: [makeJob({ id: 'train-9', state: 'PENDING' })] };
      }
    };
    return { fake, asked };
  }

  it('shows the links, the current one marked, and resumes from the failed one', async () => {
    const { fake, asked } = client(chainOf('train-2'));
    const resumed: IJob[][] = [];
    render(
      <ChainView
        client={fake}
        job={makeJob({ id: 'train-2', name: 'train', state: 'FAILED' })}
        onResumed={jobs => resumed.push(jobs)}
      />
    );
    await screen.findByText('Chain (3 links)');
    const rows = Array.from(document.querySelectorAll('tbody tr'));
    expect(rows.map(row => row.querySelector('code')?.textContent)).toEqual([
      'prep-1',
      'train-2',
      'eval-3'
    ]);
    expect(rows[1].getAttribute('aria-current')).toBe('true');
    expect(rows[2].textContent).toContain(
      'train failed: rank 0 exited with code 3 (train-2)'
    );
    expect(rows[2].textContent).toContain('after train-2');
    fireEvent.click(screen.getByText('Resume with my changes'));
    await waitFor(() => expect(resumed.length).toBe(1));
    expect(asked).toEqual(['chain train-2', 'resume train-2 true']);
    expect(resumed[0][0].id).toBe('train-9');
  });

  it('shows why a held job waits, and nothing for a job without a chain', async () => {
    const held = makeJob({
      id: 'eval-3',
      state: 'PENDING',
      held: 'waiting for train-2 (train)'
    });
    const { fake } = client(chainOf(null));
    render(<ChainView client={fake} job={held} />);
    expect(screen.getByRole('status').textContent).toBe(
      'waiting for train-2 (train)'
    );
    await screen.findByText('Chain (3 links)');
    expect(screen.queryByText('Resume from here')).toBeNull();

    const alone: IJobChain = { job_id: 'x', failed: null, links: [] };
    const { container } = render(
      <ChainView client={client(alone).fake} job={makeJob({ id: 'x' })} />
    );
    await waitFor(() => expect(container.innerHTML).toBe(''));
  });
});
