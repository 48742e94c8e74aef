import { fireEvent, render, screen, within } from '@testing-library/react';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { JobsView } from '../components/JobsView';
import { sweepBest, sweepCounts, SweepRows } from '../components/SweepRows';
import { IFormState, toParamValue, toSubmission, validateParam } from '../form';
import { HyperpodModel } from '../model';
import { IJob, ISweepSummary, ITemplateInfo, ITemplateParam } from '../models';
import { DEFAULT_SETTINGS } from '../settings';
import {
  listedValues,
  sweepSize,
  sweptValues,
  toSweepRequest
} from '../sweepForm';
import { makeJob, makeSpec } from './fixtures';

function member(index: number, state: IJob['state'], held = false): IJob {
  const lr = [1e-4, 2e-4][index >> 1];
  const r = [8, 16][index % 2];
  return makeJob({
    id: `qlora-${index}-abcdef`,
    name: `qlora-lr${lr}-r${r}`,
    state,
    created: 1000 + index,
    held: held
      ? 'waiting for a slot: 2 of sweep qlora’s 2 started at once'
      : null,
    spec: makeSpec({
      sweep: {
        group: 'qlora-123abc',
        name: 'qlora',
        index,
        size: 4,
        point: { learning_rate: lr, lora_r: r },
        max_concurrent: 2,
        metric: 'loss',
        goal: 'min'
      }
    })
  });
}

const MEMBERS = [
  member(0, 'SUCCEEDED'),
  member(1, 'RUNNING'),
  member(2, 'PENDING', true),
  member(3, 'PENDING', true)
];

function summary(extra: Partial<ISweepSummary> = {}): ISweepSummary {
  return {
    id: 'qlora-123abc',
    name: 'qlora',
    template: 'qlora-finetune',
    fields: ['learning_rate', 'lora_r'],
    size: 4,
    members: MEMBERS.map(job => job.id),
    counts: {
      PENDING: 2,
      RUNNING: 1,
      SUCCEEDED: 1,
      FAILED: 0,
      CANCELLED: 0,
      waiting: 2
    },
    state: 'RUNNING',
    progress: 0.25,
    max_concurrent: 2,
    metric: 'loss',
    goal: 'min',
    best: {
      job_id: MEMBERS[0].id,
      name: MEMBERS[0].name,
      value: 3.686712,
      step: 5,
      point: { learning_rate: 1e-4, lora_r: 8 }
    },
    created: 1000,
    ...extra
  };
}

describe('the group row of a sweep', () => {
  it('shows progress, counts per state and the best member so far', () => {
    expect(sweepCounts(summary())).toBe(
      '1 running, 2 pending (2 waiting for a slot), 1 succeeded'
    );
    expect(sweepBest(summary())).toBe('best loss 3.687 (qlora-lr0.0001-r8)');
    expect(sweepBest(summary({ best: null }))).toBe('');
    const compareJobs = jest.fn();
    const cancelSweep = jest.fn();
    render(
      <SweepRows
        sweeps={[summary()]}
        jobs={MEMBERS}
        compareJobs={compareJobs}
        cancelSweep={cancelSweep}
      />
    );
    const row = screen.getByRole('listitem', { name: 'Sweep qlora' });
    expect(within(row).getByText('Sweep qlora')).toBeTruthy();
    expect(within(row).getByText('1/4 done')).toBeTruthy();
    expect(row.textContent).toContain('at most 2 at once');
    expect(row.textContent).toContain('swept learning_rate, lora_r');
    expect(row.textContent).toContain('best loss 3.687');
    fireEvent.click(within(row).getByText('Compare 4'));
    expect(compareJobs.mock.calls[0][0].map((job: IJob) => job.id)).toEqual(
      MEMBERS.map(job => job.id)
    );
    fireEvent.click(within(row).getByText('Cancel 3'));
    expect(cancelSweep).toHaveBeenCalledWith(summary());
  });

  it('has nothing to cancel once every member ended, and hides sweeps not listed', () => {
    const { container } = render(
      <SweepRows
        sweeps={[
          summary({
            counts: { SUCCEEDED: 4, waiting: 0 },
            state: 'SUCCEEDED',
            progress: 1
          }),
          summary({ id: 'other-000000', name: 'other', members: ['gone'] })
        ]}
        jobs={MEMBERS}
        cancelSweep={jest.fn()}
      />
    );
    expect(container.querySelectorAll('.jp-hyperpod-SweepRow')).toHaveLength(1);
    const cancel = screen.getByText('Cancel 0') as HTMLButtonElement;
    expect(cancel.disabled).toBe(true);
  });

  it('is shown above the members in the Jobs list, and its Cancel posts the cancel', async () => {
    const cancelled = { summary: summary(), jobs: MEMBERS };
    const client = {
      jobs: jest.fn().mockResolvedValue({ jobs: MEMBERS, total: 4 }),
      sweeps: jest.fn().mockResolvedValue({ sweeps: [summary()] }),
      cancelSweep: jest.fn().mockResolvedValue(cancelled)
    };
    const model = new HyperpodModel(
      client as unknown as HyperpodClient,
      DEFAULT_SETTINGS
    );
    // One poll of the list (the poll itself is not started here).
    await (
      model as unknown as { _refreshJobs(): Promise<void> }
    )._refreshJobs();
    expect(client.sweeps).toHaveBeenCalledTimes(1);
    render(
      <JobsView
        model={model}
        openJob={jest.fn()}
        cancelJob={jest.fn()}
        resubmitJob={jest.fn()}
        compareJobs={jest.fn()}
      />
    );
    const sweeps = screen.getByRole('list', { name: 'Sweeps' });
    expect(sweeps.textContent).toContain('1/4 done');
    expect(screen.getByRole('list', { name: 'Jobs' }).children).toHaveLength(4);
    fireEvent.click(within(sweeps).getByText('Cancel 3'));
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(client.cancelSweep).toHaveBeenCalledWith('qlora-123abc');
  });
});

function param(extra: Partial<ITemplateParam>): ITemplateParam {
  return {
    name: 'x',
    title: 'X',
    type: 'string',
    default: null,
    required: false,
    description: '',
    choices: null,
    minimum: null,
    maximum: null,
    group: 'training',
    must_exist: false,
    program: false,
    ...extra
  };
}

const TEMPLATE: ITemplateInfo = {
  name: 'qlora-finetune',
  title: 'QLoRA',
  description: '',
  params: [
    param({ name: 'config', title: 'Config', type: 'path', required: true }),
    param({
      name: 'learning_rate',
      title: 'Learning rate',
      type: 'number',
      minimum: 0
    }),
    param({ name: 'lora_r', title: 'LoRA rank', type: 'integer', minimum: 1 }),
    param({ name: 'args', title: 'Arguments', type: 'string' })
  ]
};

describe('a list of values in the Submit form', () => {
  const form: IFormState = {
    template: 'qlora-finetune',
    name: 'qlora',
    values: {
      config: 'proj/args.yaml',
      learning_rate: '1e-4, 2e-4, 5e-4',
      lora_r: '8,16',
      args: 'a,b'
    }
  } as IFormState;

  it('makes the grid of the listed numbers (not of text fields)', () => {
    expect(listedValues('number', '1e-4, 2e-4,')).toEqual(['1e-4', '2e-4']);
    expect(listedValues('string', 'a,b')).toBeNull();
    expect(listedValues('number', '1e-4')).toBeNull();
    const swept = sweptValues(TEMPLATE, form);
    expect(swept).toEqual({
      learning_rate: [1e-4, 2e-4, 5e-4],
      lora_r: [8, 16]
    });
    expect(sweepSize(swept)).toBe(6);
    expect(sweepSize({})).toBe(1);
  });

  it('previews the first member and posts the lists as a sweep', () => {
    const submission = toSubmission(TEMPLATE, form);
    expect(submission.params).toEqual({
      config: 'proj/args.yaml',
      learning_rate: 1e-4,
      lora_r: 8,
      args: 'a,b'
    });
    const request = toSweepRequest(submission, sweptValues(TEMPLATE, form), 2);
    expect(request).toEqual({
      name: 'qlora',
      template: 'qlora-finetune',
      params: { config: 'proj/args.yaml', args: 'a,b' },
      sweep: { learning_rate: [1e-4, 2e-4, 5e-4], lora_r: [8, 16] },
      max_concurrent: 2
    });
  });

  it('checks every listed value', () => {
    const lr = TEMPLATE.params[1];
    const r = TEMPLATE.params[2];
    expect(validateParam(lr, '1e-4, 2e-4')).toBeNull();
    expect(validateParam(lr, '1e-4, fast')).toBe('fast: Enter a number.');
    expect(validateParam(r, '8, 16.5')).toBe('16.5: Enter a whole number.');
    expect(validateParam(r, '8, 0')).toBe('0: At least 1.');
    expect(toParamValue(r, '16, 8')).toBe(16);
  });
});
