import {
  act,
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
import { ApiError } from '../handler';
import { alignByStep } from '../metrics';
import { HyperpodModel } from '../model';
import { IJob } from '../models';
import { DEFAULT_SETTINGS } from '../settings';
import {
  CODE_DIFF,
  makeComparedJob,
  makeComparison,
  makeDiff,
  makeJobMetrics,
  points
} from './compareFixtures';
import { makeJob } from './fixtures';

// uPlot draws on a canvas, which jsdom lacks: record what each chart is given instead.
interface IPlot {
  metric: string | null;
  labels: string[];
  colors: string[];
  data: unknown;
}
const plots: IPlot[] = [];
jest.mock('uplot', () =>
  jest
    .fn()
    .mockImplementation((options: any, data: unknown, host: HTMLElement) => {
      const plot: IPlot & Record<string, unknown> = {
        width: 200,
        metric: host.closest('figure')!.getAttribute('data-metric'),
        labels: options.series.slice(1).map((s: any) => s.label),
        colors: options.series.slice(1).map((s: any) => s.stroke),
        data,
        setData(next: unknown) {
          plot.data = next;
        },
        setSize: () => undefined,
        destroy: () => {
          plots.splice(plots.indexOf(plot), 1);
        }
      };
      plots.push(plot);
      return plot;
    })
);

(globalThis as any).ResizeObserver = class {
  observe() {
    return undefined;
  }
  disconnect() {
    return undefined;
  }
};

/** The chart of a metric now on the page. */
function plotOf(metric: string): IPlot {
  const found = plots.filter(plot => plot.metric === metric);
  expect(found).toHaveLength(1);
  return found[0];
}

/** A client answering the fixtures, recording what was asked. */
function compareClient(failDiff = false, failMetrics: string[] = []) {
  const asked: string[] = [];
  const client: CompareClient = {
    compare: async (ids: string[]) => {
      asked.push(`compare ${ids.join(',')}`);
      return makeComparison();
    },
    diff: async (a: string, b: string) => {
      asked.push(`diff ${a} ${b}`);
      if (failDiff) {
        throw new ApiError('Job job-b not found', 404, 'NotFound');
      }
      return makeDiff();
    },
    metrics: async (id: string) => {
      asked.push(`metrics ${id}`);
      if (failMetrics.includes(id)) {
        throw new ApiError(
          'MLflow at http://mlflow:5000 does not answer: start it, or set HyperPodApp.mlflow_tracking_uri',
          503,
          'MlflowUnavailable'
        );
      }
      return makeJobMetrics(id);
    }
  };
  return { client, asked };
}

/** Three jobs: job-c ran no MLflow run. */
function threeJobs() {
  const comparison = makeComparison();
  comparison.jobs.push(
    makeComparedJob({ id: 'job-c', name: 'qlora-c', state: 'FAILED' })
  );
  return comparison;
}

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

describe('CompareView: metric curves', () => {
  function threeClient(failMetrics: string[] = []) {
    const { client, asked } = compareClient(false, failMetrics);
    client.compare = async () => threeJobs();
    return { client, asked };
  }

  it('overlays each metric: one line per job, named in the legend, aligned by step', async () => {
    const { client } = threeClient();
    render(<CompareView client={client} ids={['job-a', 'job-b', 'job-c']} />);
    const training = await screen.findByRole('group', {
      name: 'Training curves'
    });
    // Training first, as the Metrics tab orders it: loss, eval loss, learning rate.
    expect(
      Array.from(training.querySelectorAll('figure')).map(f =>
        f.getAttribute('data-metric')
      )
    ).toEqual(['loss', 'eval_loss', 'learning_rate']);
    // A one-point metric is a final value (the table's), not a curve.
    expect(document.querySelector('figure[data-metric="train_runtime"]')).toBe(
      null
    );
    const loss = plotOf('loss');
    expect(loss.labels).toEqual(['qlora-a', 'qlora-b']);
    // Every step either job logged, each job's value there or null (job-b logs every other).
    expect(loss.data).toEqual([
      [1, 2, 3, 4],
      [2.0, 1.5, 1.2, null],
      [null, 2.1, null, 1.0]
    ]);
    // One colour per job, the same in every chart (and its column's swatch).
    expect(loss.colors[0]).not.toBe(loss.colors[1]);
    const evalLoss = plotOf('eval_loss');
    expect(evalLoss.labels).toEqual(['qlora-a']);
    expect(evalLoss.colors).toEqual([loss.colors[0]]);
    expect(plotOf('learning_rate').colors).toEqual(loss.colors);
    expect(
      training.querySelector('figure[data-metric="eval_loss"] figcaption')!
        .textContent
    ).toBe('eval_loss1 of 3 jobs');
    const swatches = Array.from(
      document.querySelectorAll<HTMLElement>(
        '.jp-hyperpod-CompareTable thead .jp-hyperpod-Swatch'
      )
    ).map(el => el.dataset.series);
    expect(swatches).toEqual(['0', '1', '2']);
    // System metrics folded away, as in the Metrics tab.
    const system = document.querySelector<HTMLDetailsElement>(
      'details.jp-hyperpod-MetricsSystem'
    )!;
    expect(system.open).toBe(false);
    expect(plotOf('system/cpu_utilization_percentage').labels).toEqual([
      'qlora-b'
    ]);
    // The job without a run says so.
    const missing = screen.getByRole('list', { name: 'Jobs without curves' });
    expect(missing.textContent).toBe(
      'qlora-c: No MLflow run is tagged with this job'
    );
  });

  it('smooths each job’s line over its own points, keeping the steps it lacks empty', async () => {
    const { client } = threeClient();
    render(<CompareView client={client} ids={['job-a', 'job-b', 'job-c']} />);
    await screen.findByRole('group', { name: 'Training curves' });
    act(() => {
      fireEvent.change(screen.getByLabelText('Smoothing'), {
        target: { value: '0.6' }
      });
    });
    const [steps, a, b] = plotOf('loss').data as number[][];
    expect(steps).toEqual([1, 2, 3, 4]);
    // Debiased EMA: the first point stays, the next leans on it.
    expect(a[0]).toBeCloseTo(2.0);
    expect(a[1]).toBeCloseTo((0.6 * 0.4 * 2.0 + 0.4 * 1.5) / (1 - 0.36));
    expect(a[3]).toBeNull();
    expect(b[0]).toBeNull();
    expect(b[1]).toBeCloseTo(2.1);
    expect(b[3]).toBeCloseTo((0.6 * 0.4 * 2.1 + 0.4 * 1.0) / (1 - 0.36));
  });

  it('names a job whose metrics fail, with the server’s message, and draws the others', async () => {
    const { client } = threeClient(['job-b']);
    render(<CompareView client={client} ids={['job-a', 'job-b', 'job-c']} />);
    await screen.findByRole('group', { name: 'Training curves' });
    expect(plotOf('loss').labels).toEqual(['qlora-a']);
    const missing = screen.getByRole('list', { name: 'Jobs without curves' });
    expect(
      Array.from(missing.querySelectorAll('li')).map(li => li.textContent)
    ).toEqual([
      'qlora-b: MLflow at http://mlflow:5000 does not answer: start it, or set HyperPodApp.mlflow_tracking_uri',
      'qlora-c: No MLflow run is tagged with this job'
    ]);
  });

  it('says so when no job logged a curve', async () => {
    const { client } = compareClient();
    client.compare = async () => ({
      ...threeJobs(),
      jobs: [
        threeJobs().jobs[2],
        { ...threeJobs().jobs[2], id: 'job-d', name: 'qlora-d' }
      ]
    });
    render(<CompareView client={client} ids={['job-c', 'job-d']} />);
    expect(
      await screen.findByText('None of these jobs logged a metric curve.')
    ).toBeTruthy();
    expect(screen.queryByLabelText('Smoothing')).toBeNull();
    expect(
      screen.getByRole('list', { name: 'Jobs without curves' }).children
    ).toHaveLength(2);
  });

  it('tells two jobs of one name apart in the legend', async () => {
    const { client } = compareClient();
    client.compare = async () => {
      const comparison = makeComparison();
      comparison.jobs[1].name = 'qlora-a';
      return comparison;
    };
    render(<CompareView client={client} ids={['job-a', 'job-b']} />);
    await screen.findByRole('group', { name: 'Training curves' });
    expect(plotOf('loss').labels).toEqual([
      'qlora-a (job-a)',
      'qlora-a (job-b)'
    ]);
  });
});

describe('alignByStep', () => {
  it('puts runs on every step any logged, the last value of a repeated step winning', () => {
    expect(
      alignByStep([
        points([
          [3, 1],
          [1, 3],
          [3, 2]
        ]),
        points([[2, 5]]),
        []
      ])
    ).toEqual([
      [1, 2, 3],
      [3, null, 2],
      [null, 5, null],
      [null, null, null]
    ]);
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
