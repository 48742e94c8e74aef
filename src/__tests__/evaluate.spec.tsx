import { render, screen, waitFor, within } from '@testing-library/react';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { MetricsView } from '../components/MetricsView';

import {
  delta,
  EvaluateView,
  generationLine,
  isEvaluateJob
} from '../components/EvaluateView';
import { IJob, IJobMetrics } from '../models';
import { makeJob, makeSpec } from './fixtures';

function job(extra: Partial<IJob> = {}): IJob {
  return makeJob({
    id: 'ev-1',
    name: 'ev',
    state: 'SUCCEEDED',
    ended: 3,
    exit_code: 0,
    spec: makeSpec({ name: 'ev', template: 'evaluate' }),
    ...extra
  });
}

const scored: IJobMetrics = {
  run: {
    run_id: 'abc',
    experiment_id: '1',
    status: 'FINISHED',
    url: 'http://mlflow:5000/#/experiments/1/runs/abc'
  },
  metrics: {},
  message: null,
  evaluation: {
    rouge: [
      { name: 'rouge1', base: 0.12, finetuned: 0.41, delta: 0.29 },
      { name: 'rouge2', base: 0.05, finetuned: 0.04, delta: -0.01 },
      { name: 'rougeL', base: 0.1, finetuned: 0.33, delta: 0.23 },
      { name: 'rougeLsum', base: null, finetuned: 0.39, delta: null }
    ],
    samples: 16,
    max_new_tokens: 96,
    metric_names: ['eval_rouge1_base', 'eval_rouge1_finetuned']
  }
};

describe('the Evaluate view', () => {
  it('shows every ROUGE variant, base beside fine-tuned, with the delta', () => {
    render(<EvaluateView job={job()} metrics={scored} />);
    const table = screen.getByRole('table', {
      name: 'ROUGE: fine-tuned vs base'
    });
    const rows = within(table).getAllByRole('row');
    expect(rows.map(r => r.textContent)).toEqual([
      'ROUGEBaseFine-tunedΔ',
      'rouge10.12000.4100+0.2900',
      'rouge20.05000.0400−0.0100',
      'rougeL0.10000.3300+0.2300',
      'rougeLsum–0.3900–'
    ]);
    expect(rows[1].querySelector('.jp-mod-up')).not.toBeNull();
    expect(rows[2].querySelector('.jp-mod-down')).not.toBeNull();
    expect(
      screen.getByText('Mean F1 on 16 test examples, up to 96 new tokens.')
    ).toBeTruthy();
    expect(screen.queryByRole('status')).toBeNull();
  });

  it('says how far generation is while the job runs', () => {
    const running = job({
      state: 'RUNNING',
      progress: {
        step: 12,
        total: 32,
        fraction: 0.375,
        elapsed_seconds: 20,
        eta_seconds: 36,
        loss: null,
        source: 'tqdm'
      }
    });
    render(<EvaluateView job={running} metrics={null} />);
    expect(screen.getByRole('status').textContent).toBe(
      'Generating 12/32 examples · 37% · ETA 36s'
    );
    expect(screen.queryByRole('table')).toBeNull();
  });

  it('says what it waits for before the first example', () => {
    render(<EvaluateView job={job({ state: 'RUNNING' })} metrics={null} />);
    expect(screen.getByRole('status').textContent).toBe(
      'Loading the fine-tuned and base models…'
    );
  });

  it("says the server's reason when an ended evaluation has no scores", () => {
    const none: IJobMetrics = {
      run: null,
      metrics: {},
      message: 'no MLflow run tagged hyperpod.job_id=ev-1 yet',
      evaluation: null
    };
    render(<EvaluateView job={job({ state: 'FAILED' })} metrics={none} />);
    expect(
      screen.getByText('no MLflow run tagged hyperpod.job_id=ev-1 yet')
    ).toBeTruthy();
  });

  it('is for evaluate jobs and runs holding an evaluation', () => {
    expect(isEvaluateJob(job(), null)).toBe(true);
    const training = job({ spec: makeSpec({ template: 'qlora' }) });
    expect(isEvaluateJob(training, null)).toBe(false);
    expect(isEvaluateJob(training, scored)).toBe(true);
    expect(delta(0)).toBe('±0.0000');
    expect(
      generationLine({
        step: 32,
        total: 32,
        fraction: 1,
        elapsed_seconds: 50,
        eta_seconds: 0,
        loss: null,
        source: 'tqdm'
      })
    ).toBe('Generating 32/32 examples · 100%');
  });
});

describe("an evaluate job's Metrics tab", () => {
  const point = (value: number) => [{ step: 0, value, timestamp: 1 }];
  const withRun = (url: string | null): IJobMetrics => ({
    ...scored,
    run: { ...scored.run!, url },
    metrics: {
      eval_rouge1_base: point(0.12),
      eval_rouge1_finetuned: point(0.41),
      train_runtime: point(42)
    }
  });
  const client = (metrics: IJobMetrics) =>
    ({
      metrics: jest.fn().mockResolvedValue(metrics)
    }) as unknown as HyperpodClient;

  it('leads with the table, links the run in MLflow, and keeps the rest apart', async () => {
    render(
      <MetricsView
        client={client(withRun(scored.run!.url))}
        job={job()}
        jobId="ev-1"
        running={false}
        refreshInterval={10}
      />
    );
    await waitFor(() => screen.getByRole('table'));
    const link = screen.getByRole('link', { name: /Open in MLflow/ });
    expect(link.getAttribute('href')).toBe(
      'http://mlflow:5000/#/experiments/1/runs/abc'
    );
    // The scores are not repeated as one-value cards; the run's other metrics are kept.
    const cards = Array.from(document.querySelectorAll('[data-metric]')).map(
      node => node.getAttribute('data-metric')
    );
    expect(cards).toEqual(['train_runtime']);
    expect(screen.getByText("The run's other metrics (1)")).toBeTruthy();
  });

  it('says why there is no link when the server knows no MLflow UI', async () => {
    render(
      <MetricsView
        client={client(withRun(null))}
        job={job()}
        jobId="ev-1"
        running={false}
        refreshInterval={10}
      />
    );
    const note = await waitFor(() => screen.getByText('No MLflow UI'));
    expect(note.getAttribute('title')).toContain('HyperPodApp.mlflow_ui_url');
    expect(screen.queryByRole('link')).toBeNull();
  });
});
