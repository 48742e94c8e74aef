import {
  fireEvent,
  render,
  screen,
  waitFor,
  within
} from '@testing-library/react';
import * as React from 'react';

import { HyperpodClient, MAX_COMPARED } from '../api';
import {
  CompareClient,
  compareKey,
  CompareView
} from '../components/compare/CompareView';
import { comparisonRows } from '../components/compare/ComparisonTable';
import { JobsView } from '../components/JobsView';
import { HyperpodModel } from '../model';
import { IJob } from '../models';
import { DEFAULT_SETTINGS } from '../settings';
import {
  CODE_DIFF,
  compareClient,
  makeComparison,
  makeDiff,
  makeJobMetrics,
  threeJobs
} from './compareFixtures';
import { makeJob } from './fixtures';

jest.mock('uplot', () => require('./plotDouble').fakeUplot);

function rowCells(key: string): string[] {
  const row = document.querySelector(`tr[data-row="${key}"]`);
  expect(row).not.toBeNull();
  return Array.from(row!.querySelectorAll('td')).map(td => td.textContent!);
}

describe('CompareView', () => {
  it('shows the jobs as columns and what differs as rows', async () => {
    const { client, asked } = compareClient();
    render(<CompareView client={client} ids={['job-a', 'job-b']} />);
    await screen.findByRole('table', { name: 'Jobs side by side' });
    const heads = Array.from(
      document.querySelectorAll('.jp-hyperpod-CompareTable > thead th')
    ).map(th => th.textContent);
    expect(heads).toEqual(['Job', 'qlora-a', 'qlora-b']);
    expect(rowCells('state')).toEqual(['SUCCEEDED', 'FAILED']);
    expect(rowCells('duration')).toEqual(['12m 34s', '1m 5s']);
    expect(rowCells('exit_code')).toEqual(['0', '1']);
    expect(rowCells('commit')).toEqual(['3f2a9c1', '3f2a9c1+diff']);
    expect(rowCells('value:env.LR')).toEqual(['1e-4', '5e-4']);
    expect(rowCells('value:train.yaml:lora.r')).toEqual(['8', '–']);
    expect(rowCells('metric:loss')).toEqual(['0.812300', '1.50000']);
    expect(rowCells('metric:eval_loss')).toEqual(['0.900000', '–']);
    // The ROUGE scores in their table only, not again as a metric row.
    expect(document.querySelector('tr[data-row^="metric:eval_rouge"]')).toBe(
      null
    );
    expect(screen.getByText('job-b: MLflow run not found')).toBeTruthy();
    expect(asked.slice(0, 2)).toEqual([
      'compare job-a,job-b',
      'diff job-a job-b'
    ]);
  });

  it('orders rows: outcome, differing values, metrics (loss first), ROUGE', () => {
    expect(comparisonRows(makeComparison()).map(r => r.key)).toEqual([
      'state',
      'duration',
      'exit_code',
      'commit',
      'value:env.LR',
      'value:train.yaml:lora.r',
      'metric:loss',
      'metric:eval_loss',
      'rouge'
    ]);
  });

  it('shows an evaluate job’s ROUGE as its own view does: base, fine-tuned, Δ per variant', async () => {
    const { client } = compareClient();
    render(<CompareView client={client} ids={['job-a', 'job-b']} />);
    await screen.findByRole('table', { name: 'Jobs side by side' });
    const row = document.querySelector('tr[data-row="rouge"]')!;
    expect(row.querySelector('th')!.textContent).toBe(
      'ROUGE (base vs fine-tuned)'
    );
    const [a, b] = Array.from(row.querySelectorAll(':scope > td'));
    expect(a.textContent).toBe('–');
    // The evaluate job's RougeTable (EvaluateView's), in its column.
    const table = within(b as HTMLElement).getByRole('table', {
      name: 'ROUGE: fine-tuned vs base'
    });
    expect(table.classList.contains('jp-hyperpod-RougeTable')).toBe(true);
    expect(
      Array.from(table.querySelectorAll(':scope > thead th')).map(
        th => th.textContent
      )
    ).toEqual(['ROUGE', 'Base', 'Fine-tuned', 'Δ']);
    expect(
      Array.from(table.querySelectorAll(':scope > tbody > tr')).map(tr =>
        Array.from(tr.children).map(cell => cell.textContent)
      )
    ).toEqual([
      ['rouge1', '0.2000', '0.4900', '+0.2900'],
      ['rougeL', '0.1800', '0.1700', '−0.0100']
    ]);
    expect(
      table.querySelector('tr[data-rouge="rougeL"] td.jp-mod-down')
    ).not.toBeNull();
    expect(b.textContent).toContain(
      'Mean F1 on 32 test examples, up to 64 new tokens.'
    );
  });

  it('shows two jobs’ diff: spec, configs, code collapsed, packages, notes', async () => {
    const { client } = compareClient();
    render(<CompareView client={client} ids={['job-a', 'job-b']} />);
    const spec = await screen.findByRole('region', { name: 'Spec' });
    expect(spec.querySelector('h3')!.textContent).toBe('Spec (1)');
    // Columns are named after the jobs, once the comparison has them.
    await waitFor(() =>
      expect(
        Array.from(spec.querySelectorAll('thead th')).map(t => t.textContent)
      ).toEqual(['Spec field', 'qlora-a', 'qlora-b'])
    );
    const lr = spec.querySelector('tr[data-field="env.LR"]')!;
    expect(
      Array.from(lr.querySelectorAll('td')).map(t => t.textContent)
    ).toEqual(['1e-4', '5e-4']);
    const configs = screen.getByRole('region', { name: 'Configs' });
    expect(
      configs.querySelector(
        '[data-config="train.yaml"] tr[data-field="lora.r"]'
      )!.textContent
    ).toBe('lora.r8–');
    const code = screen.getByRole('region', { name: 'Code' });
    expect(code.textContent).toContain('qlora-a: 3f2a9c1, 3 files');
    expect(code.textContent).toContain('qlora-b: 3f2a9c1+diff, 4 files');
    expect(code.textContent).toContain('2 unchanged');
    const file = code.querySelector('li[data-path="train.py"]')!;
    const details = file.querySelector('details')!;
    expect(details.open).toBe(false);
    expect(file.querySelector('summary')!.textContent).toBe(
      'train.py changed · 1.0 KB → 1.1 KB'
    );
    expect(file.querySelector('pre.jp-hyperpod-Diff-text')!.textContent).toBe(
      CODE_DIFF
    );
    const binary = code.querySelector('li[data-path="weights.bin"]')!;
    expect(binary.querySelector('pre')).toBeNull();
    expect(binary.textContent).toContain(
      'over 256 KiB: compared by SHA-256 only'
    );
    const packages = screen.getByRole('region', { name: 'Packages' });
    expect(
      Array.from(packages.querySelectorAll('tbody tr')).map(r => r.textContent)
    ).toEqual(['torch2.3.02.4.1', 'peft–0.12.0']);
    expect(
      screen.getByText('job-a: no resolved config recorded for eval.yaml')
    ).toBeTruthy();
  });

  it('says which side has no snapshot or no commit', async () => {
    const diff = makeDiff();
    diff.code = {
      a: null,
      b: { ...diff.code.b!, commit: null },
      files: [],
      unchanged: 0
    };
    const client: CompareClient = {
      compare: async () => makeComparison(),
      diff: async () => diff,
      metrics: async (id: string) => makeJobMetrics(id)
    };
    render(<CompareView client={client} ids={['job-a', 'job-b']} />);
    const code = await screen.findByRole('region', { name: 'Code' });
    await waitFor(() =>
      expect(code.textContent).toContain(
        'qlora-a: no snapshot · qlora-b: 4 files'
      )
    );
    expect(code.textContent).toContain('No file differs (0 the same).');
  });

  it('asks no diff for three jobs, and compares again on Refresh', async () => {
    const { client, asked } = compareClient();
    client.compare = async (ids: string[]) => {
      asked.push(`compare ${ids.join(',')}`);
      return threeJobs();
    };
    render(<CompareView client={client} ids={['job-a', 'job-b', 'job-c']} />);
    await screen.findByRole('table', { name: 'Jobs side by side' });
    expect(screen.queryByRole('region', { name: 'Spec' })).toBeNull();
    await screen.findByRole('group', { name: 'Training curves' });
    fireEvent.click(screen.getByTitle('Compare again'));
    await waitFor(() => expect(asked.length).toBe(8));
    expect(asked.filter(line => line.startsWith('compare'))).toEqual([
      'compare job-a,job-b,job-c',
      'compare job-a,job-b,job-c'
    ]);
    // Each job's curves loaded again too.
    expect(asked.filter(line => line === 'metrics job-c')).toHaveLength(2);
  });

  it('shows the server’s message when the diff fails, the table still', async () => {
    const { client } = compareClient(true);
    render(<CompareView client={client} ids={['job-a', 'job-b']} />);
    expect(await screen.findByText(/Job job-b not found/)).toBeTruthy();
    expect(
      screen.getByRole('table', { name: 'Jobs side by side' })
    ).toBeTruthy();
  });

  it('keys a set by its ids in any order', () => {
    expect(compareKey(['b', 'a'])).toBe(compareKey(['a', 'b']));
    expect(compareKey(['a', 'b'])).not.toBe(compareKey(['a', 'b', 'c']));
  });
});

describe('JobsView: Compare', () => {
  function listed(count: number) {
    const model = new HyperpodModel({} as HyperpodClient, DEFAULT_SETTINGS);
    for (let i = 0; i < count; i++) {
      model.upsertJob(
        makeJob({
          id: `job-${i}`,
          name: `run-${i}`,
          state: 'SUCCEEDED',
          created: 1_700_000_000 + i
        })
      );
    }
    const compareJobs = jest.fn();
    render(
      <JobsView
        model={model}
        openJob={jest.fn()}
        cancelJob={jest.fn()}
        resubmitJob={jest.fn()}
        compareJobs={compareJobs}
      />
    );
    return compareJobs;
  }

  it('offers Compare from two selected jobs', () => {
    const compareJobs = listed(3);
    fireEvent.click(screen.getByLabelText('Select run-0'));
    const one = screen.getByRole('button', { name: 'Compare 1' });
    expect((one as HTMLButtonElement).disabled).toBe(true);
    fireEvent.click(screen.getByLabelText('Select run-2'));
    fireEvent.click(screen.getByRole('button', { name: 'Compare 2' }));
    // Oldest first, whatever the list's order (newest first).
    expect(compareJobs.mock.calls[0][0].map((j: IJob) => j.id)).toEqual([
      'job-0',
      'job-2'
    ]);
  });

  it('refuses more than the server compares at once', () => {
    const compareJobs = listed(MAX_COMPARED + 1);
    fireEvent.click(screen.getByLabelText('Select all jobs shown'));
    const button = screen.getByRole('button', {
      name: `Compare ${MAX_COMPARED + 1}`
    }) as HTMLButtonElement;
    expect(button.disabled).toBe(true);
    expect(button.title).toBe(`Compare takes at most ${MAX_COMPARED} jobs`);
    fireEvent.click(screen.getByLabelText('Select run-0'));
    fireEvent.click(
      screen.getByRole('button', { name: `Compare ${MAX_COMPARED}` })
    );
    expect(compareJobs.mock.calls[0][0]).toHaveLength(MAX_COMPARED);
  });
});
