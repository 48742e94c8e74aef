/**
 * GPU figures from the server (`GET gpu/nodes`, `GET jobs/{id}/gpu`): the DCGM exporter's series
 * in the cluster's Prometheus, or NVML/nvidia-smi on the local backend. Types follow
 * `jupyter_hyperpod/gpu/models.py`.
 */
import { ServerConnection } from '@jupyterlab/services';

import { requestAPI } from './handler';

export type GpuSource =
  'prometheus' | 'amp' | 'grafana' | 'nvml' | 'nvidia-smi';

export interface IGpuDevice {
  gpu: string;
  uuid?: string | null;
  model?: string | null;
  utilization?: number | null;
  memory_used_mb?: number | null;
  memory_total_mb?: number | null;
  power_w?: number | null;
  temperature_c?: number | null;
  xid_error?: number | null;
  pod?: string | null;
  namespace?: string | null;
}

export interface IGpuNode {
  node: string;
  gpus: IGpuDevice[];
  utilization?: number | null;
  memory_used_mb?: number | null;
  memory_total_mb?: number | null;
}

export interface IGpuNodes {
  source: GpuSource | null;
  time: number;
  nodes: IGpuNode[];
  message?: string | null;
}

export interface IGpuSeries {
  metric: 'utilization' | 'memory_used_mb' | 'power_w' | 'temperature_c';
  node?: string | null;
  gpu?: string | null;
  points: [number, number][];
}

export interface IJobGpu {
  source: GpuSource | null;
  start?: number | null;
  end?: number | null;
  step?: number | null;
  series: IGpuSeries[];
  message?: string | null;
}

/** What the GPU views need from the server (a fake in the tests). */
export interface IGpuApi {
  gpuNodes(): Promise<IGpuNodes>;
  jobGpu(jobId: string, step?: number): Promise<IJobGpu>;
}

export class GpuClient implements IGpuApi {
  constructor(readonly serverSettings: ServerConnection.ISettings) {}

  gpuNodes(): Promise<IGpuNodes> {
    return requestAPI<IGpuNodes>(
      'gpu/nodes',
      { method: 'GET' },
      this.serverSettings
    );
  }

  jobGpu(jobId: string, step?: number): Promise<IJobGpu> {
    const query = step ? `?step=${encodeURIComponent(String(step))}` : '';
    return requestAPI<IJobGpu>(
      `jobs/${encodeURIComponent(jobId)}/gpu${query}`,
      { method: 'GET' },
      this.serverSettings
    );
  }
}

const clients = new WeakMap<object, IGpuApi>();

/**
 * The GPU API beside a panel client: the client itself when it has the calls (a test fake),
 * else one on the same server settings; null when there is neither.
 */
export function gpuApiFor(client: unknown): IGpuApi | null {
  if (!client || typeof client !== 'object') {
    return null;
  }
  const candidate = client as Partial<IGpuApi> & {
    serverSettings?: ServerConnection.ISettings;
  };
  if (
    typeof candidate.gpuNodes === 'function' &&
    typeof candidate.jobGpu === 'function'
  ) {
    return candidate as IGpuApi;
  }
  if (!candidate.serverSettings) {
    return null;
  }
  let found = clients.get(client);
  if (!found) {
    found = new GpuClient(candidate.serverSettings);
    clients.set(client, found);
  }
  return found;
}

/** Nodes by name, for the Cluster view's rows. */
export function gpuByNode(figures: IGpuNodes | null): Map<string, IGpuNode> {
  return new Map((figures?.nodes ?? []).map(node => [node.node, node]));
}

/** A fraction in [0, 1], or null when a figure is missing. */
export function ratio(
  value: number | null | undefined,
  total: number | null | undefined
): number | null {
  if (value === null || value === undefined || !total || total <= 0) {
    return null;
  }
  return Math.min(1, Math.max(0, value / total));
}

/** "12.3 GiB" from MiB. */
export function formatMiB(value: number): string {
  return value >= 1024
    ? `${(value / 1024).toFixed(1)} GiB`
    : `${Math.round(value)} MiB`;
}

export interface IAligned {
  /** Shared x values (seconds since the epoch), then one y array per series. */
  data: (number | null)[][];
  labels: string[];
}

/**
 * One metric's series on one time axis (uPlot's aligned data): every timestamp any series has,
 * null where a series has no point.
 */
export function alignSeries(
  series: IGpuSeries[],
  metric: IGpuSeries['metric']
): IAligned {
  const chosen = series.filter(s => s.metric === metric && s.points.length > 0);
  const times = Array.from(
    new Set(chosen.flatMap(s => s.points.map(([t]) => t)))
  ).sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const columns = chosen.map(s => {
    const column: (number | null)[] = times.map(() => null);
    for (const [t, v] of s.points) {
      column[index.get(t)!] = v;
    }
    return column;
  });
  const manyNodes = new Set(chosen.map(s => s.node)).size > 1;
  const labels = chosen.map(s =>
    manyNodes ? `${s.node ?? '?'} GPU ${s.gpu ?? '?'}` : `GPU ${s.gpu ?? '?'}`
  );
  return { data: [times, ...columns], labels };
}

/** The mean of the last value of each series (the job's utilisation now). */
export function lastMean(
  series: IGpuSeries[],
  metric: IGpuSeries['metric']
): number | null {
  const last = series
    .filter(s => s.metric === metric && s.points.length > 0)
    .map(s => s.points[s.points.length - 1][1]);
  return last.length ? last.reduce((a, b) => a + b, 0) / last.length : null;
}
