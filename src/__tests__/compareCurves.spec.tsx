import { act, fireEvent, render, screen } from '@testing-library/react';
import * as React from 'react';

import { CompareView } from '../components/compare/CompareView';
import { alignByStep } from '../metrics';
import {
  compareClient,
  makeComparison,
  points,
  threeJobs
} from './compareFixtures';
import { plotOf } from './plotDouble';

jest.mock('uplot', () => require('./plotDouble').fakeUplot);

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
