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
