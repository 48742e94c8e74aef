/**
 * The compared jobs' metric curves overlaid: one chart per metric (training first: loss, eval
 * loss, learning rate..., then the system metrics folded away), one line per job in the job's
 * colour (the same as its column's swatch), aligned by step. Each job's history is its
 * `GET jobs/{id}/metrics` (MLflow), loaded on open and on Refresh; a job without curves says why.
 */
import * as React from 'react';
import uPlot from 'uplot';

import { HyperpodClient } from '../../api';
import { ApiError } from '../../handler';
import { alignByStep, groupMetricNames } from '../../metrics';
import { asApiError } from '../../model';
import { IJobMetrics } from '../../models';
import { Loading } from '../common';
import {
  ILine,
  LineChart,
  seriesLine,
  SmoothingSelect,
  SystemChartsFold,
  useThemeKey
} from '../LineChart';

export type CurvesClient = Pick<HyperpodClient, 'metrics'>;

/** A compared job, in its column's order (its index picks its colour). */
export interface ICurveJob {
  id: string;
  name: string;
}

/** What one job's metrics request gave. */
export interface IJobCurves {
  metrics: IJobMetrics | null;
  error: ApiError | null;
}

/** A metric's chart: the jobs that logged it (their column index) and the aligned lines. */
export interface IOverlay {
  name: string;
  jobs: number[];
  lines: ILine[];
  data: uPlot.AlignedData;
}

/** The metrics a job has a curve of: two points or more, its ROUGE scores aside. */
function curvesOf(run: IJobCurves | undefined): string[] {
  if (!run?.metrics) {
    return [];
  }
  const scored = new Set(run.metrics.evaluation?.metric_names ?? []);
  return Object.entries(run.metrics.metrics)
    .filter(([name, points]) => points.length > 1 && !scored.has(name))
    .map(([name]) => name);
}

/** Each job's legend label: its name, with its id where two jobs share a name. */
function labels(jobs: ICurveJob[]): string[] {
  return jobs.map(job =>
    jobs.filter(other => other.name === job.name).length > 1
      ? `${job.name} (${job.id})`
      : job.name
  );
}

/** Every metric's overlay, training metrics first, as the Metrics tab orders them. */
export function overlays(
  jobs: ICurveJob[],
  runs: Record<string, IJobCurves>,
  smoothing = 0
): { training: IOverlay[]; system: IOverlay[] } {
  const names = new Set(jobs.flatMap(job => curvesOf(runs[job.id])));
  const label = labels(jobs);
  const overlay = (name: string): IOverlay => {
    const chosen = jobs
      .map((job, index) => ({
        index,
        points: runs[job.id]?.metrics?.metrics[name]
      }))
      .filter(
        (
          entry
        ): entry is { index: number; points: IJobMetrics['metrics'][string] } =>
          (entry.points?.length ?? 0) > 0
      );
    return {
      name,
      jobs: chosen.map(entry => entry.index),
      lines: chosen.map(entry => seriesLine(entry.index, label[entry.index])),
      data: alignByStep(
        chosen.map(entry => entry.points),
        smoothing
      ) as uPlot.AlignedData
    };
  };
  const groups = groupMetricNames(Array.from(names));
  return {
    training: groups.training.map(overlay),
    system: groups.system.map(overlay)
  };
}

/** Why a job has no line in any chart ("qlora-b: MLflow run not found"), or null. */
export function missingCurves(
  job: ICurveJob,
  run: IJobCurves | undefined
): string | null {
  if (!run) {
    return null;
  }
  if (run.error) {
    return `${job.name}: ${run.error.message}`;
  }
  if (curvesOf(run).length > 0) {
    return null;
  }
  const message = run.metrics?.message;
  return `${job.name}: ${message ?? 'no metric curve logged (no metric with two steps or more)'}`;
}

export function CompareCurves(props: {
  client: CurvesClient;
  jobs: ICurveJob[];
  /** Loaded again when this changes (the view's Refresh). */
  serial: number;
}): JSX.Element {
  const { client, jobs, serial } = props;
  const [runs, setRuns] = React.useState<Record<string, IJobCurves> | null>(
    null
  );
  const ids = jobs.map(job => job.id).join(',');
  React.useEffect(() => {
    let live = true;
    Promise.all(
      jobs.map(job =>
        client.metrics(job.id).then(
          (metrics): IJobCurves => ({ metrics, error: null }),
          (error): IJobCurves => ({ metrics: null, error: asApiError(error) })
        )
      )
    ).then(results => {
      if (live) {
        setRuns(Object.fromEntries(jobs.map((job, i) => [job.id, results[i]])));
      }
    });
    return () => {
      live = false;
    };
  }, [serial, ids]);

  const themeKey = useThemeKey();
  const [smoothing, setSmoothing] = React.useState(0);
  const charts = React.useMemo(
    () => (runs ? overlays(jobs, runs, smoothing) : null),
    [runs, smoothing, jobs.map(job => job.name).join('\n')]
  );
  const chart = (overlay: IOverlay) => (
    <LineChart
      key={overlay.name}
      name={overlay.name}
      data={overlay.data}
      lines={overlay.lines}
      themeKey={themeKey}
      caption={
        overlay.jobs.length < jobs.length && (
          <span className="jp-hyperpod-Chart-last">
            {overlay.jobs.length} of {jobs.length} jobs
          </span>
        )
      }
    />
  );
  const missing = runs
    ? jobs
        .map(job => missingCurves(job, runs[job.id]))
        .filter((line): line is string => line !== null)
    : [];
  const count = charts ? charts.training.length + charts.system.length : 0;
  return (
    <section
      className="jp-hyperpod-Diff-section jp-hyperpod-CompareCurves"
      aria-label="Metric curves"
    >
      <div className="jp-hyperpod-MetricsHeader">
        <h3 className="jp-hyperpod-MetricsGroup">
          Metric curves
          {count > 0 && (
            <span className="jp-hyperpod-Dim"> · aligned by step</span>
          )}
        </h3>
        <span className="jp-hyperpod-Spacer" />
        {count > 0 && (
          <SmoothingSelect value={smoothing} onChange={setSmoothing} />
        )}
      </div>
      {charts === null ? (
        <Loading what="the metric curves" />
      ) : (
        <>
          {charts.training.length > 0 && (
            <div
              className="jp-hyperpod-Charts"
              role="group"
              aria-label="Training curves"
            >
              {charts.training.map(chart)}
            </div>
          )}
          <SystemChartsFold>{charts.system.map(chart)}</SystemChartsFold>
          {count === 0 && (
            <div className="jp-hyperpod-Dim">
              None of these jobs logged a metric curve.
            </div>
          )}
          {missing.length > 0 && (
            <ul
              className="jp-hyperpod-Diff-notes"
              aria-label="Jobs without curves"
            >
              {missing.map(line => (
                <li key={line}>{line}</li>
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}
