import { launchIcon } from '@jupyterlab/ui-components';
import * as React from 'react';
import uPlot from 'uplot';

import { HyperpodClient } from '../api';
import { ApiError } from '../handler';
import { groupMetricNames, metricSeries, smooth } from '../metrics';
import { asApiError } from '../model';
import { IJob, IJobMetrics, IMetricPoint } from '../models';
import { ErrorMessage, Loading } from './common';
import { EvaluateView, isEvaluateJob } from './EvaluateView';
import {
  ILine,
  LineChart,
  SmoothingSelect,
  SystemChartsFold,
  tickLabel,
  useThemeKey
} from './LineChart';
import { usePoll } from './usePoll';

/** A metric with one value is a number, not a chart of one dot. */
function SingleValue(props: {
  name: string;
  point: IMetricPoint;
}): JSX.Element {
  return (
    <figure
      className="jp-hyperpod-Chart jp-mod-single"
      data-metric={props.name}
    >
      <figcaption>
        <span className="jp-hyperpod-Chart-name">{props.name}</span>
      </figcaption>
      <div className="jp-hyperpod-Chart-value">
        {tickLabel(props.point.value)}
        <span className="jp-hyperpod-Chart-last">
          at step {props.point.step}
        </span>
      </div>
    </figure>
  );
}

/** One metric's curve and, with smoothing on, its smoothed line over it (faint raw line). */
function Chart(props: {
  name: string;
  points: IMetricPoint[];
  smoothing: number;
  themeKey: number;
}): JSX.Element {
  const smoothed = props.smoothing > 0;
  const data = React.useMemo(() => {
    const [steps, values] = metricSeries(props.points);
    return smoothed
      ? ([steps, values, smooth(values, props.smoothing)] as uPlot.AlignedData)
      : ([steps, values] as uPlot.AlignedData);
  }, [props.points, props.smoothing]);
  const lines: ILine[] = smoothed
    ? [
        {
          label: props.name,
          color: '--jp-brand-color3',
          fallback: '#90caf9',
          width: 1
        },
        {
          label: 'smoothed',
          color: '--jp-brand-color1',
          fallback: '#1976d2',
          width: 2
        }
      ]
    : [
        {
          label: props.name,
          color: '--jp-brand-color1',
          fallback: '#1976d2',
          width: 2,
          points: data[0].length < 40
        }
      ];
  const last = props.points[props.points.length - 1];
  return (
    <LineChart
      name={props.name}
      data={data}
      lines={lines}
      themeKey={props.themeKey}
      caption={
        last && (
          <span className="jp-hyperpod-Chart-last">
            {tickLabel(last.value)} at step {last.step}
          </span>
        )
      }
    />
  );
}

export function MetricsView(props: {
  client: HyperpodClient;
  jobId: string;
  running: boolean;
  refreshInterval: number;
  isVisible?: () => boolean;
  /** The job shown: an evaluate job gets its own view (EvaluateView) above its curves. */
  job?: IJob | null;
}): JSX.Element {
  const [metrics, setMetrics] = React.useState<IJobMetrics | null>(null);
  const [error, setError] = React.useState<ApiError | null>(null);

  const load = async () => {
    try {
      const result = await props.client.metrics(props.jobId);
      setMetrics(result);
      setError(null);
    } catch (reason) {
      setError(asApiError(reason));
      throw reason;
    }
  };
  // Once at first, again when the job ends (its last points), and while it runs.
  React.useEffect(() => {
    load().catch(() => undefined);
  }, [props.jobId, props.running]);
  const refresh = usePoll(
    load,
    props.refreshInterval,
    props.running,
    [props.jobId],
    props.isVisible
  );

  const themeKey = useThemeKey();
  const [smoothing, setSmoothing] = React.useState(0);
  const evaluating = isEvaluateJob(props.job, metrics);
  const scored = new Set(metrics?.evaluation?.metric_names ?? []);
  // The scores are in the evaluation's table: not again as one-value cards.
  const names = metrics
    ? Object.keys(metrics.metrics).filter(name => !scored.has(name))
    : [];
  const groups = groupMetricNames(names);
  const chart = (name: string) => {
    const points = metrics!.metrics[name];
    return points.length === 1 ? (
      <SingleValue key={name} name={name} point={points[0]} />
    ) : (
      <Chart
        key={name}
        name={name}
        points={points}
        smoothing={smoothing}
        themeKey={themeKey}
      />
    );
  };
  return (
    <div className="jp-hyperpod-MetricsView">
      <div className="jp-hyperpod-MetricsHeader">
        {metrics?.run ? (
          <span>
            MLflow run <code>{metrics.run.run_id.slice(0, 12)}</code> ·{' '}
            {metrics.run.status}
          </span>
        ) : (
          <span />
        )}
        <span className="jp-hyperpod-Spacer" />
        {names.length > 0 && (
          <SmoothingSelect value={smoothing} onChange={setSmoothing} />
        )}
        {metrics?.run?.url ? (
          <a
            className="jp-hyperpod-Link"
            href={metrics.run.url}
            target="_blank"
            rel="noopener noreferrer"
          >
            <launchIcon.react tag="span" elementSize="normal" />
            Open in MLflow
          </a>
        ) : (
          metrics?.run && (
            <span
              className="jp-hyperpod-Muted"
              title="The server knows no MLflow UI address for this tracking store: set HyperPodApp.mlflow_ui_url to where `mlflow ui` serves it"
            >
              No MLflow UI
            </span>
          )
        )}
      </div>
      {evaluating && <EvaluateView job={props.job} metrics={metrics} />}
      <ErrorMessage error={error} stale={metrics !== null} onRetry={refresh} />
      {metrics === null ? (
        error ? null : (
          <Loading what="metrics" />
        )
      ) : names.length === 0 ? (
        evaluating ? null : (
          <div className="jp-hyperpod-Empty">
            {metrics.message ?? 'This job has logged no metric yet.'}
          </div>
        )
      ) : evaluating ? (
        <details className="jp-hyperpod-MetricsSystem">
          <summary className="jp-hyperpod-MetricsGroup">
            The run's other metrics ({names.length})
          </summary>
          <div className="jp-hyperpod-Charts">{names.map(chart)}</div>
        </details>
      ) : (
        <>
          {groups.training.length > 0 && (
            <section aria-label="Training metrics">
              <h3 className="jp-hyperpod-MetricsGroup">Training</h3>
              <div className="jp-hyperpod-Charts">
                {groups.training.map(chart)}
              </div>
            </section>
          )}
          <SystemChartsFold>{groups.system.map(chart)}</SystemChartsFold>
        </>
      )}
    </div>
  );
}
