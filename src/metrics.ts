/** Shaping MLflow metric histories for charts. */

import { IMetricPoint } from './models';

/** [steps, values] sorted by step, the last value winning for a repeated step. */
export function metricSeries(points: IMetricPoint[]): [number[], number[]] {
  const byStep = new Map<number, number>();
  for (const point of points) {
    if (Number.isFinite(point.value)) {
      byStep.set(point.step, point.value);
    }
  }
  const steps = Array.from(byStep.keys()).sort((a, b) => a - b);
  return [steps, steps.map(step => byStep.get(step)!)];
}

const FIRST = ['loss', 'train_loss', 'eval_loss', 'learning_rate', 'grad_norm'];

/** The usual training curves first, then the rest alphabetically. */
export function sortMetricNames(names: string[]): string[] {
  const rank = (name: string) => {
    const index = FIRST.indexOf(name);
    return index >= 0 ? index : FIRST.length;
  };
  return [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** MLflow's system metrics (`mlflow.system_metrics`) are logged as "system/<name>". */
export function isSystemMetric(name: string): boolean {
  return name.startsWith('system/');
}

/** Training metrics (sorted, loss first) and system metrics (CPU, GPU, memory), apart. */
export function groupMetricNames(names: string[]): {
  training: string[];
  system: string[];
} {
  const sorted = sortMetricNames(names);
  return {
    training: sorted.filter(name => !isSystemMetric(name)),
    system: sorted.filter(isSystemMetric)
  };
}

/**
 * Exponential moving average with TensorBoard's debiasing (the first points are not pulled
 * towards zero); `weight` 0 returns the values unchanged.
 */
export function smooth(values: number[], weight: number): number[] {
  if (weight <= 0) {
    return [...values];
  }
  let last = 0;
  let count = 0;
  return values.map(value => {
    count += 1;
    last = last * weight + (1 - weight) * value;
    return last / (1 - Math.pow(weight, count));
  });
}

/**
 * Several runs' histories of one metric on one step axis (uPlot's aligned data): every step any
 * run logged, in order, then one column per run with null where that run has no point there
 * (each column smoothed over its own points first when `weight` is above 0).
 */
export function alignByStep(
  histories: IMetricPoint[][],
  weight = 0
): [number[], ...(number | null)[][]] {
  const series = histories.map(points => {
    const [steps, values] = metricSeries(points);
    return [steps, smooth(values, weight)] as const;
  });
  const steps = Array.from(new Set(series.flatMap(([s]) => s))).sort(
    (a, b) => a - b
  );
  const index = new Map(steps.map((step, i) => [step, i]));
  const columns = series.map(([s, values]) => {
    const column: (number | null)[] = steps.map(() => null);
    s.forEach((step, i) => {
      column[index.get(step)!] = values[i];
    });
    return column;
  });
  return [steps, ...columns];
}
