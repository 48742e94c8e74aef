import * as React from 'react';
import uPlot from 'uplot';

import {
  alignSeries,
  formatMiB,
  IGpuApi,
  IGpuNode,
  IGpuNodes,
  IJobGpu,
  lastMean,
  ratio
} from '../gpu';
import { usePoll } from './usePoll';

/**
 * The cluster's GPU figures, polled every `seconds` while the panel shows (standby when hidden);
 * null until the first answer or without a GPU API. Failures keep the last figures.
 */
export function useGpuNodes(
  api: IGpuApi | null,
  seconds: number,
  isVisible?: () => boolean
): IGpuNodes | null {
  const [figures, setFigures] = React.useState<IGpuNodes | null>(null);
  const load = async () => {
    if (api) {
      setFigures(await api.gpuNodes());
    }
  };
  React.useEffect(() => {
    load().catch(() => undefined);
  }, [api]);
  usePoll(load, seconds, api !== null, [api], isVisible);
  return figures;
}

function Meter(props: {
  fraction: number | null;
  text: string;
  label: string;
  title: string;
  kind: 'util' | 'memory';
}): JSX.Element {
  const percent = Math.round((props.fraction ?? 0) * 100);
  return (
    <span
      className={`jp-hyperpod-GpuMeter jp-hyperpod-GpuMeter-${props.kind}`}
      role="meter"
      aria-valuemin={0}
      aria-valuemax={100}
      aria-valuenow={percent}
      aria-label={props.label}
      title={props.title}
    >
      <span className="jp-hyperpod-GpuBar-track">
        <span
          className="jp-hyperpod-GpuBar-fill jp-hyperpod-GpuMeter-fill"
          style={{ width: `${percent}%` }}
        />
      </span>
      <span className="jp-hyperpod-GpuBar-text">{props.text}</span>
    </span>
  );
}

/** A node's GPU utilisation and memory now, as two small bars (nothing without figures). */
export function NodeGpuBars(props: { node?: IGpuNode }): JSX.Element | null {
  const { node } = props;
  if (!node || node.gpus.length === 0) {
    return null;
  }
  const util = node.utilization ?? null;
  const used = node.memory_used_mb ?? null;
  const total = node.memory_total_mb ?? null;
  const perGpu = node.gpus
    .map(
      g =>
        `GPU ${g.gpu}: ${g.utilization ?? '?'}%` +
        (g.memory_used_mb !== null && g.memory_used_mb !== undefined
          ? `, ${formatMiB(g.memory_used_mb)}`
          : '') +
        (g.temperature_c ? `, ${g.temperature_c} °C` : '') +
        (g.power_w ? `, ${Math.round(g.power_w)} W` : '') +
        (g.xid_error ? `, XID ${g.xid_error}` : '')
    )
    .join('\n');
  const xid = node.gpus.find(g => g.xid_error);
  return (
    <span className="jp-hyperpod-NodeGpu" data-gpu-node={node.node}>
      <Meter
        kind="util"
        fraction={util === null ? null : util / 100}
        text={util === null ? 'GPU —' : `GPU ${Math.round(util)}%`}
        label={`GPU utilisation on ${node.node}`}
        title={perGpu}
      />
      {used !== null && (
        <Meter
          kind="memory"
          fraction={ratio(used, total)}
          text={
            total
              ? `mem ${Math.round((ratio(used, total) ?? 0) * 100)}%`
              : `mem ${formatMiB(used)}`
          }
          label={`GPU memory on ${node.node}`}
          title={
            (total
              ? `${formatMiB(used)} of ${formatMiB(total)} GPU memory used\n`
              : '') + perGpu
          }
        />
      )}
      {xid && (
        <span
          className="jp-hyperpod-NodeGpu-xid"
          title={`GPU ${xid.gpu} reported XID ${xid.xid_error}`}
        >
          XID {xid.xid_error}
        </span>
      )}
    </span>
  );
}

/** The whole cluster's GPUs in one line: busy, memory, and where the figures come from. */
export function ClusterGpuSummary(props: {
  figures: IGpuNodes | null;
}): JSX.Element | null {
  const { figures } = props;
  if (!figures) {
    return null;
  }
  if (figures.nodes.length === 0) {
    // No source at all says nothing; a configured source that fails or is empty says why.
    return figures.source && figures.message ? (
      <div className="jp-hyperpod-GpuSummary jp-hyperpod-GpuSummary-empty">
        GPU metrics ({figures.source}): {figures.message}
      </div>
    ) : null;
  }
  const gpus = figures.nodes.flatMap(n => n.gpus);
  const utils = gpus
    .map(g => g.utilization)
    .filter((v): v is number => typeof v === 'number');
  const used = gpus.reduce((sum, g) => sum + (g.memory_used_mb ?? 0), 0);
  const total = gpus.reduce((sum, g) => sum + (g.memory_total_mb ?? 0), 0);
  const mean = utils.length
    ? utils.reduce((a, b) => a + b, 0) / utils.length
    : null;
  return (
    <div className="jp-hyperpod-GpuSummary" aria-label="GPU utilisation">
      <Meter
        kind="util"
        fraction={mean === null ? null : mean / 100}
        text={mean === null ? '—' : `${Math.round(mean)}% busy`}
        label="GPU utilisation in the cluster"
        title={`${gpus.length} GPU(s) reporting`}
      />
      {total > 0 && (
        <Meter
          kind="memory"
          fraction={ratio(used, total)}
          text={`${formatMiB(used)}/${formatMiB(total)}`}
          label="GPU memory in the cluster"
          title="GPU memory used"
        />
      )}
      <span className="jp-hyperpod-GpuSummary-source">{figures.source}</span>
    </div>
  );
}

function cssVar(name: string, fallback: string): string {
  return (
    getComputedStyle(document.body).getPropertyValue(name).trim() || fallback
  );
}

const PALETTE = [
  '#1976d2',
  '#e65100',
  '#2e7d32',
  '#6a1b9a',
  '#c62828',
  '#00838f',
  '#9e9d24',
  '#4e342e'
];

/** GPU utilisation over the job's run, one line per GPU (uPlot, time axis). */
export function JobGpuChart(props: {
  api: IGpuApi | null;
  jobId: string;
  running: boolean;
  refreshInterval: number;
  isVisible?: () => boolean;
}): JSX.Element | null {
  const [answer, setAnswer] = React.useState<IJobGpu | null>(null);
  const load = async () => {
    if (props.api) {
      setAnswer(await props.api.jobGpu(props.jobId));
    }
  };
  React.useEffect(() => {
    load().catch(() => undefined);
  }, [props.jobId, props.running, props.api]);
  usePoll(
    load,
    Math.max(5, props.refreshInterval),
    props.running && props.api !== null,
    [props.jobId],
    props.isVisible
  );

  const aligned = React.useMemo(
    () => alignSeries(answer?.series ?? [], 'utilization'),
    [answer]
  );
  const hostRef = React.useRef<HTMLDivElement>(null);
  const plotRef = React.useRef<uPlot | null>(null);
  const shape = aligned.labels.join('|');
  const hasData = aligned.labels.length > 0;

  React.useEffect(() => {
    const host = hostRef.current;
    if (!host || !hasData) {
      return;
    }
    const axis = {
      stroke: cssVar('--jp-ui-font-color2', '#666'),
      grid: { stroke: cssVar('--jp-border-color2', '#ddd'), width: 1 },
      ticks: { stroke: cssVar('--jp-border-color2', '#ddd'), width: 1 }
    };
    const plot = new uPlot(
      {
        width: Math.max(200, host.clientWidth),
        height: 160,
        legend: { show: true },
        scales: { x: { time: true }, y: { range: [0, 100] } },
        axes: [
          { ...axis },
          {
            ...axis,
            size: 48,
            values: (_u: uPlot, s: number[]) => s.map(v => `${v}%`)
          }
        ],
        series: [
          {},
          ...aligned.labels.map((label, i) => ({
            label,
            stroke: PALETTE[i % PALETTE.length],
            width: 1.5,
            spanGaps: true
          }))
        ]
      },
      aligned.data as uPlot.AlignedData,
      host
    );
    plotRef.current = plot;
    const resize = new ResizeObserver(() => {
      const w = host.clientWidth;
      if (w > 0 && Math.abs(w - plot.width) > 2) {
        plot.setSize({ width: w, height: 160 });
      }
    });
    resize.observe(host);
    return () => {
      resize.disconnect();
      plot.destroy();
      plotRef.current = null;
    };
  }, [shape, hasData]);

  React.useEffect(() => {
    plotRef.current?.setData(aligned.data as uPlot.AlignedData);
  }, [aligned]);

  if (!props.api || answer === null) {
    return null;
  }
  if (!hasData) {
    // Nothing to show where the cluster has no GPU metrics; a reason where it has some.
    return answer.source && answer.message ? (
      <div className="jp-hyperpod-Empty jp-hyperpod-JobGpu-empty">
        GPU utilisation: {answer.message}
      </div>
    ) : null;
  }
  const now = lastMean(answer.series, 'utilization');
  return (
    <figure
      className="jp-hyperpod-Chart jp-hyperpod-JobGpu"
      data-metric="gpu-utilization"
    >
      <figcaption>
        <span className="jp-hyperpod-Chart-name">GPU utilisation</span>
        {now !== null && (
          <span className="jp-hyperpod-Chart-last">
            {Math.round(now)}% {props.running ? 'now' : 'at the end'} ·{' '}
            {aligned.labels.length} GPU{aligned.labels.length === 1 ? '' : 's'}{' '}
            · {answer.source}
          </span>
        )}
      </figcaption>
      <div ref={hostRef} className="jp-hyperpod-Chart-plot" />
    </figure>
  );
}
