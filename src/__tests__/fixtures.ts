import type { ISocketLike } from '../logstream';
import { IJob, IJobSpec, INode } from '../models';

/** A node as a big HyperPod cluster reports it; every tenth is drained and unhealthy. */
export function makeNode(i: number, extra: Partial<INode> = {}): INode {
  return {
    name: `ip-10-1-${Math.floor(i / 250)}-${i % 250}`,
    state: i % 10 === 0 ? 'drained' : i % 3 === 0 ? 'allocated' : 'idle',
    health: i % 10 === 0 ? 'unhealthy' : 'healthy',
    health_detail: i % 10 === 0 ? 'deep health check failed' : null,
    instance_type: i % 2 ? 'ml.p5.48xlarge' : 'ml.g5.8xlarge',
    instance_group: i % 2 ? 'gpu-p5' : 'gpu-g5',
    cpus: 192,
    memory_mb: 2_000_000,
    gpus: { total: 8, allocated: i % 3 === 0 ? 8 : 0, type: 'nvidia.com/gpu' },
    efa: 32,
    partitions: ['dev'],
    labels: {},
    ...extra
  };
}

/** A job spec as the server sends it: JobSpec's defaults, `name` and `command` given. */
export function makeSpec(extra: Partial<IJobSpec> = {}): IJobSpec {
  return {
    name: 'train',
    command: ['train.py'],
    workdir: '',
    nodes: 1,
    procs_per_node: 1,
    gpus_per_node: 0,
    env: {},
    launcher: 'auto',
    time_limit_minutes: null,
    queue: null,
    priority_class: null,
    image: null,
    kind: null,
    namespace: null,
    auto_resume: false,
    max_retries: 0,
    efa_per_node: 0,
    healthy_nodes_only: false,
    template: null,
    params: {},
    overrides: {},
    watchdog: null,
    exclude_nodes: [],
    after: [],
    after_any: false,
    sweep: null,
    ...extra
  };
}

/** A socket the test drives: open it, send frames, close it with a code (1006: dropped). */
export class FakeSocket implements ISocketLike {
  constructor(readonly url: string) {}
  binaryType = 'blob';
  onopen: ((event: any) => void) | null = null;
  onmessage: ((event: { data: any }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: any) => void) | null = null;
  closed = false;

  close(): void {
    this.closed = true;
  }
  open(): void {
    this.onopen?.({});
  }
  send(frame: unknown): void {
    this.onmessage?.({ data: JSON.stringify(frame) });
  }
  drop(code = 1006, reason = ''): void {
    this.onclose?.({ code, reason });
  }
}

/** A whole job as GET jobs serves it: a running one unless `extra` says otherwise. */
export function makeJob(extra: Partial<IJob> = {}): IJob {
  return {
    id: 'job-1',
    name: 'job',
    user: 'alice',
    orchestrator: 'local',
    backend_id: '1',
    state: 'RUNNING',
    state_reason: null,
    created: 1,
    started: 2,
    ended: null,
    exit_code: null,
    ranks: [],
    spec: makeSpec({ name: extra.name ?? 'job' }),
    events: [],
    progress: null,
    watchdog: null,
    operator_verdict: null,
    mlflow_run_url: null,
    stale_reason: null,
    stale_since: null,
    failed_rank: null,
    snapshot: null,
    held: null,
    ...extra
  };
}
