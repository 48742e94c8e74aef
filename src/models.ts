/**
 * The REST API's JSON shapes, mirroring jupyter_hyperpod/core/models.py.
 */

export type Orchestrator = 'local' | 'slurm' | 'kubernetes';
export type Health = 'healthy' | 'degraded' | 'unhealthy' | 'unknown';
export type JobState =
  'PENDING' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED';
export type RenderFormat = 'command' | 'sbatch' | 'manifest';

export const FINISHED_STATES: ReadonlyArray<JobState> = [
  'SUCCEEDED',
  'FAILED',
  'CANCELLED'
];

export function isFinished(state: JobState): boolean {
  return FINISHED_STATES.includes(state);
}

export interface IGpuCount {
  total: number;
  allocated: number;
  type: string | null;
}

export interface INode {
  name: string;
  state: string;
  health: Health;
  health_detail: string | null;
  instance_type: string | null;
  instance_group: string | null;
  cpus: number;
  memory_mb: number;
  gpus: IGpuCount;
  efa: number;
  partitions: string[];
  labels: Record<string, string>;
}

export interface ICapabilities {
  cancel: boolean;
  follow_logs: boolean;
  per_rank_logs: boolean;
  metrics: boolean;
  multi_node: boolean;
  gpus: boolean;
  job_kinds: string[];
  render_format: RenderFormat;
  /** The server can list HyperPod clusters and connect to one (it has boto3). */
  aws_connect?: boolean;
}

/** A HyperPod cluster of the server's AWS region (GET aws/clusters). */
export interface IAwsCluster {
  name: string;
  arn: string | null;
  status: string | null;
  orchestrator: 'eks' | 'slurm' | null;
  eks_cluster_arn: string | null;
  connectable: boolean;
  /** Why the cluster is not connectable. */
  reason: string | null;
}

export interface IAwsClusterList {
  region: string;
  clusters: IAwsCluster[];
}

/** POST aws/connect: the server switches to the cluster's kubeconfig context. */
export interface IAwsConnectRequest {
  cluster: string;
  region?: string;
  namespace?: string;
  /** A Slurm cluster: make the server's machine its login node, then switch to it. */
  slurm?: boolean;
  controller_group?: string;
}

export interface IFileSystemInfo {
  root: string;
  cluster_root: string;
  partition: string;
  partition_mode: string;
  contents_path: string | null;
  fsx: Record<string, unknown> | null;
}

export interface IClusterInfo {
  orchestrator: Orchestrator;
  name: string;
  user: string;
  filesystem: IFileSystemInfo;
  capabilities: ICapabilities;
  mlflow_uri: string | null;
  default_template: string | null;
  details: Record<string, unknown>;
  /** Kubernetes only: the watch cache of nodes and pods (null elsewhere). */
  watch_cache?: IWatchCacheStatus | null;
}

/** One resource of the Kubernetes watch cache (list once, then watch). */
export interface IWatchedResource {
  synced: boolean;
  connected: boolean;
  stale_s: number | null;
  last_list_age_s: number | null;
  last_event_age_s: number | null;
  resource_version: string;
  items: number;
  relists: number;
  expired: number;
  error: string | null;
}

export interface IWatchCacheStatus {
  enabled: boolean;
  started: boolean;
  /** Every resource synced and watched: reads come from memory. */
  fresh: boolean;
  nodes: IWatchedResource;
  pods: IWatchedResource;
}

export type FileType = 'file' | 'directory' | 'symlink' | 'other';

export interface IFileEntry {
  name: string;
  type: FileType;
  size: number;
  mtime: number;
}

export type FileSort = 'name' | '-name' | 'size' | '-size' | 'mtime' | '-mtime';

export interface IFileListing {
  path: string;
  entries: IFileEntry[];
  total: number;
  offset: number;
  limit: number;
  sort: string;
  /** Entries not listed: their names are not valid UTF-8 (see `note`). */
  skipped?: number;
  /** Why entries were skipped, and what to do. */
  note?: string | null;
}

export type ParamType =
  'string' | 'integer' | 'number' | 'boolean' | 'path' | 'choice' | 'text';

export interface ITemplateParam {
  name: string;
  title: string;
  type: ParamType;
  default: unknown;
  required: boolean;
  description: string;
  choices: string[] | null;
  minimum: number | null;
  maximum: number | null;
  group: string;
  /** For paths: must name an existing file or directory of the partition. */
  must_exist?: boolean;
  /** For paths: the program a rank runs (a file, executable unless a .py script). */
  program?: boolean;
}

export interface ITemplateInfo {
  name: string;
  title: string;
  description: string;
  params: ITemplateParam[];
}

export interface IJobSpec {
  name: string;
  command: string[];
  workdir?: string;
  nodes?: number;
  procs_per_node?: number;
  gpus_per_node?: number;
  env?: Record<string, string>;
  launcher?: 'auto' | 'torchrun' | 'plain';
  time_limit_minutes?: number | null;
  queue?: string | null;
  image?: string | null;
  kind?: string | null;
  auto_resume?: boolean;
  max_retries?: number;
  efa_per_node?: number;
  healthy_nodes_only?: boolean;
  namespace?: string | null;
  template?: string | null;
  params?: Record<string, unknown>;
  /** Spec fields set on top of what the template built (kept for resubmit). */
  overrides?: Record<string, unknown>;
  /** Hang and straggler detection; null: the admin's defaults. */
  watchdog?: IWatchdogSpec | null;
  /** Nodes the job must not run on (a resubmit without a suspect node). */
  exclude_nodes?: string[];
}

/** The job's watchdog; a field left null takes the admin's default. */
export interface IWatchdogSpec {
  enabled?: boolean;
  step_pattern?: string | null;
  hang_factor?: number | null;
  hang_floor_seconds?: number | null;
  start_cutoff_seconds?: number | null;
  straggler_fraction?: number | null;
  straggler_windows?: number | null;
  window_seconds?: number | null;
  auto_cancel_minutes?: number | null;
  /** HyperPodPyTorchJob: the operator's slow rule, our loop's tokens/s below this. */
  slow_tokens_per_second?: number | null;
}

export interface ITemplateSubmission {
  name: string;
  template: string;
  /** Only the parameters the user set: the others take the template's or config's defaults. */
  params: Record<string, unknown>;
  /** JobSpec fields set on top of what the template builds (launcher, workdir...). */
  overrides?: Record<string, unknown>;
}

export type Submission = IJobSpec | ITemplateSubmission;

export interface IRendered {
  format: RenderFormat;
  language: 'shell' | 'yaml' | 'json';
  text: string;
  spec: IJobSpec;
  warnings: string[];
  /** For a template: the value each parameter takes (given, else the config file's, else default). */
  values?: Record<string, unknown>;
}

/**
 * A fault of one rank as the orchestrator recorded it (HyperPod's faulty pod/rank fields; on
 * Slurm, the rank that failed first in an attempt, from the ranks' own records).
 */
export interface IRankFault {
  /** The job restart this fault caused (1 = the first); null: the job failed on it. */
  restart: number | null;
  /** HyperPod: JLR (job-level restart) or PLR (process-level restart). */
  restart_type: string | null;
  pod: string | null;
  node: string | null;
}

export interface IRankInfo {
  rank: number;
  node: string | null;
  state: string | null;
  exit_code: number | null;
  restarts: number;
  log: string | null;
  /** When the rank's process ended (Unix time), where the backend knows it. */
  ended?: number | null;
  /** This rank's recorded faults, oldest first. */
  faults?: IRankFault[];
}

export interface IJob {
  id: string;
  name: string;
  user: string;
  orchestrator: string;
  backend_id: string | null;
  state: JobState;
  state_reason: string | null;
  created: number;
  started: number | null;
  ended: number | null;
  exit_code: number | null;
  ranks: IRankInfo[];
  spec: IJobSpec;
  events: string[];
  mlflow_run_url: string | null;
  /** The rank the job failed on first, decided by the server (null unless FAILED). */
  failed_rank?: number | null;
  /** Running jobs: how far they are, parsed by the server from what they print. */
  progress?: IJobProgress | null;
  /** Running jobs: step clocks per rank, hang and stragglers. */
  watchdog?: IJobWatchdog | null;
}

/** One rank's step clock: the last step it printed and when the server saw it. */
export interface IRankClock {
  rank: number;
  node: string | null;
  step: number | null;
  last_step_at: number | null;
  step_seconds: number | null;
  rate: number | null;
}

export interface IStraggler {
  rank: number;
  node: string | null;
  rate: number;
  others_rate: number;
  windows: number;
}

/** What the watchdog sees of a running job: a state detail, the job stays RUNNING. */
export interface IJobWatchdog {
  /** Set while stalled: the last step on any rank (or the start). */
  stalled_since: number | null;
  stalled_detail: string | null;
  bound_seconds: number;
  stopped_first: IRankClock[];
  stragglers: IStraggler[];
  ranks: IRankClock[];
  auto_cancel_at: number | null;
}

export interface IStackFrame {
  name: string;
  filename: string;
  line: number;
  /** Not every rank's same thread has this frame at this depth. */
  differs: boolean;
}

export interface IThreadStack {
  name: string | null;
  thread_id: number;
  active: boolean;
  /** Innermost first, as py-spy prints them. */
  frames: IStackFrame[];
}

export interface IRankStack {
  rank: number;
  node: string | null;
  pid: number | null;
  threads: IThreadStack[];
  /** Why this rank has no stack. */
  error: string | null;
  /** What to add so that it has one. */
  fix: string | null;
}

/** A Python stack of every rank (py-spy dump), stored with the job. */
export interface IStackDump {
  job_id: string;
  taken_at: number;
  ranks: IRankStack[];
}

export interface IJobProgress {
  step: number;
  total: number;
  fraction: number;
  elapsed_seconds: number | null;
  eta_seconds: number | null;
  loss: number | null;
  source: string;
}

/** What removing a job from the history did. */
export interface IForgottenJob {
  id: string;
  cancelled: boolean;
  files_deleted: boolean;
  job_dir: string;
}

export interface IJobList {
  jobs: IJob[];
  total: number;
}

export interface ILogSnapshot {
  rank: number;
  text: string;
  start_offset: number;
  offset: number;
  truncated: boolean;
}

export interface IMetricPoint {
  step: number;
  value: number;
  timestamp: number;
}

export interface IMlflowRunInfo {
  run_id: string;
  experiment_id: string;
  status: string;
  url: string | null;
}

export interface IJobMetrics {
  run: IMlflowRunInfo | null;
  metrics: Record<string, IMetricPoint[]>;
  message: string | null;
}

export interface IErrorBody {
  code: string;
  message: string;
  field?: string | null;
}

/** One job of the cluster's queue, as the cluster shows it to every user (GET queue). */
export interface IQueueJob {
  id: string;
  name: string;
  user: string;
  state: JobState;
  native_state: string;
  reason: string | null;
  position: number | null;
  /** For my pending jobs: where they are in the queue and what holds the resources. */
  explanation: string | null;
  nodes: number;
  node_list: string | null;
  gpus: number;
  partition: string | null;
  namespace: string | null;
  kind: string | null;
  priority: number | null;
  priority_class: string | null;
  submitted: number | null;
  started: number | null;
  mine: boolean;
  /** This server's job id, when submitted here or adopted. */
  job_id: string | null;
  /** Mine, submitted elsewhere and not adopted yet. */
  adoptable: boolean;
  logs_readable: boolean;
  logs_reason: string | null;
  log: string | null;
}

export interface IQueuePage {
  jobs: IQueueJob[];
  total: number;
  offset: number;
  limit: number;
  counts: Record<string, number>;
  partitions: string[];
  source: string;
  fetched: number;
}

export interface IQueueLogs {
  id: string;
  text: string;
  truncated: boolean;
}

export interface IQueueQuery {
  mine?: boolean;
  /** Comma-separated states; '' = pending and running; 'all' = every state. */
  state?: string;
  queue?: string;
  offset?: number;
  limit?: number;
  refresh?: boolean;
}
