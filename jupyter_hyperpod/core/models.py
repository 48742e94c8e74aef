"""The domain model shared by the REST API, the panel, the magics, the CLI and every backend.

One `JobSpec` describes a job whatever the orchestrator; pydantic gives field-level messages for
bad input and the JSON schemas of the OpenAPI document.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator

from .blame import failed_rank

JOB_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$"
"""RFC 1123 label, short enough for Kubernetes to append pod suffixes; valid for Slurm too."""

ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
NODE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
"""A Slurm node or Kubernetes node name (RFC 1123 subdomain, Slurm's host names)."""


class JobState(str, Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def finished(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GpuCount(BaseModel):
    total: int = 0
    allocated: int = 0
    type: str | None = Field(
        None, description="GPU model or GRES type, e.g. 'a100' or 'nvidia.com/gpu'"
    )


class Node(BaseModel):
    name: str
    state: str = Field(
        description="Orchestrator state: idle, mixed, allocated, drained, down, ready, not-ready..."
    )
    health: Literal["healthy", "degraded", "unhealthy", "unknown"] = "unknown"
    health_detail: str | None = Field(
        None, description="Why the node is not healthy (drain reason, health label)"
    )
    instance_type: str | None = None
    instance_group: str | None = None
    cpus: int = 0
    memory_mb: int = 0
    gpus: GpuCount = Field(default_factory=GpuCount)
    efa: int = 0
    partitions: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)


class Capabilities(BaseModel):
    """What the configured backend can do, so that clients hide what it cannot."""

    cancel: bool = True
    follow_logs: bool = True
    per_rank_logs: bool = True
    metrics: bool = True
    multi_node: bool = False
    gpus: bool = False
    job_kinds: list[str] = Field(default_factory=list, description="Kubernetes job kinds accepted")
    render_format: Literal["command", "sbatch", "manifest"] = "command"
    aws_connect: bool = Field(
        False, description="The server can list HyperPod clusters and connect to one (has boto3)"
    )


class FileSystemInfo(BaseModel):
    root: str = Field(description="Where the shared file system is mounted on this (IDE) machine")
    cluster_root: str = Field(description="Where the cluster's jobs see the same file system")
    partition: str = Field(description="The user's partition, absolute on this machine")
    partition_mode: str
    contents_path: str | None = Field(
        None,
        description="The partition as a JupyterLab contents path, when it is inside the server root",
    )
    fsx: dict[str, Any] | None = Field(
        None, description="FSx for Lustre details when discovered through AWS"
    )


class WatchedResource(BaseModel):
    """One resource of a watch cache (list once, then watch from the list's version)."""

    synced: bool = Field(description="Listed at least once: the memory holds the resource")
    connected: bool = Field(description="Its watch is open: the memory follows the API's events")
    stale_s: float | None = Field(
        None, description="Seconds the watch has been cut (0 while connected; null before a list)"
    )
    last_list_age_s: float | None = Field(None, description="Seconds since the last full list")
    last_event_age_s: float | None = Field(
        None, description="Seconds since the last watch event (bookmarks included)"
    )
    resource_version: str = Field("", description="The version the watch resumes from")
    items: int = Field(0, description="Objects in memory")
    relists: int = Field(0, description="Full lists made, the first included")
    expired: int = Field(
        0, description="Watches the API server ended with 410 Gone (each cost a full list)"
    )
    error: str | None = Field(None, description="Why the last list or watch failed")


class WatchCacheStatus(BaseModel):
    """The Kubernetes backend's watch cache of nodes and pods: while `fresh`, requests are
    answered from memory; otherwise they list from the API server directly."""

    enabled: bool = Field(description="c.KubernetesOrchestrator.watch_cache")
    started: bool = Field(description="Started by the first read that needs it")
    fresh: bool = Field(description="Every resource synced and watched: reads come from memory")
    nodes: WatchedResource
    pods: WatchedResource


class ClusterInfo(BaseModel):
    orchestrator: str = Field(
        description="The backend's kind: local, slurm, kubernetes, or a third party's own name"
    )
    name: str
    user: str
    filesystem: FileSystemInfo
    capabilities: Capabilities
    mlflow_uri: str | None = None
    default_template: str | None = None
    details: dict[str, Any] = Field(
        default_factory=dict, description="Backend-specific facts (AWS cluster ARN...)"
    )
    watch_cache: WatchCacheStatus | None = Field(
        None, description="The Kubernetes watch cache; null on backends without one"
    )


class AwsCluster(BaseModel):
    name: str
    arn: str | None = None
    status: str | None = None
    orchestrator: Literal["eks", "slurm"] | None = Field(
        None, description="None when the cluster could not be described (see error)"
    )
    eks_cluster_arn: str | None = None
    connectable: bool = Field(description="An EKS cluster this server can switch to")
    reason: str | None = Field(None, description="Why the cluster is not connectable")


class AwsClusterList(BaseModel):
    region: str
    clusters: list[AwsCluster]


class AwsConnectRequest(StrictModel):
    cluster: str = Field(min_length=1, description="HyperPod cluster name or ARN")
    region: str | None = Field(None, description="Default: the server's AWS region")
    namespace: str | None = Field(None, description="Namespace of the new kubeconfig context")
    auth: Literal["exec", "token"] = Field(
        "exec",
        description="exec: the context refreshes its EKS token by itself (python -m "
        "jupyter_hyperpod.aws token); token: a 15-minute token written into the kubeconfig",
    )
    slurm: bool = Field(
        False,
        description="A Slurm cluster: make the server's machine its login node (slurm.conf, the "
        "munge key over SSM, munged, sinfo checked) and switch to the slurm orchestrator",
    )
    controller_group: str | None = Field(
        None,
        description="Slurm: the instance group of the controllers (default: the one group "
        "named like 'controller' or 'head')",
    )


class FileEntry(BaseModel):
    name: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int
    mtime: float


class FileListing(BaseModel):
    path: str = Field(
        description="Partition-relative path of the listed directory ('' is the partition root)"
    )
    entries: list[FileEntry]
    total: int
    offset: int
    limit: int
    sort: str
    skipped: int = Field(
        0, description="Entries not listed: their names are not valid UTF-8 (see `note`)"
    )
    note: str | None = Field(None, description="Why entries were skipped, and what to do")


STEP_PATTERN_HELP = (
    "A regular expression that matches one of the job's step lines: its group 'step' (or its "
    "first group) is the step number; without a group each matching line counts one step"
)


class WatchdogSpec(StrictModel):
    """The job's watchdog (`core/watchdog.py`); a field left null takes the admin's default
    (`c.HyperPodSettings.watchdog_*`). Hang: no new step on any rank for max(hang_factor x the
    median step time, hang_floor_seconds), or no first step within start_cutoff_seconds.
    Straggler: a rank below straggler_fraction of the others' median step rate for
    straggler_windows windows in a row."""

    enabled: bool = Field(True, description="Watch this job at all")
    step_pattern: str | None = Field(
        None, max_length=500, description=STEP_PATTERN_HELP + " (besides the built-in ones)"
    )
    hang_factor: float | None = Field(
        None, gt=0, le=1000, description="k: a hang is k median step times without a step"
    )
    hang_floor_seconds: float | None = Field(
        None, ge=1, le=7 * 86400, description="The shortest hang bound, seconds (at most a week)"
    )
    start_cutoff_seconds: float | None = Field(
        None, ge=1, le=7 * 86400, description="Seconds the first step may take (at most a week)"
    )
    straggler_fraction: float | None = Field(
        None, gt=0, lt=1, description="A straggler steps slower than this share of the others"
    )
    straggler_windows: int | None = Field(
        None, ge=1, le=1000, description="Windows in a row a straggler must stay slow"
    )
    window_seconds: float | None = Field(
        None, ge=0.5, le=86400, description="Length of one step-rate window, seconds"
    )
    auto_cancel_minutes: float | None = Field(
        None,
        gt=0,
        le=7 * 24 * 60,
        description="Cancel the job once it has been stalled this long (null: never)",
    )
    slow_tokens_per_second: int | None = Field(
        None,
        ge=1,
        le=10**9,
        description="HyperPodPyTorchJob: the operator's slow rule, our loop's tokens/s below this",
    )

    @field_validator("step_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"the pattern does not compile: {error}") from None
        return value


class JobSpec(StrictModel):
    """A job, as the panel, the magics, the CLI and the REST API all submit it."""

    name: str = Field(
        pattern=JOB_NAME_PATTERN, description="Lowercase letters, digits and '-' (RFC 1123)"
    )
    command: list[str] = Field(
        min_length=1, description="Program and arguments; a .py program runs with Python"
    )
    workdir: str = Field("", description="Working directory, relative to the partition root")
    nodes: int = Field(1, ge=1, le=4096)
    procs_per_node: int = Field(1, ge=1, le=256, description="Processes (ranks) per node")
    gpus_per_node: int = Field(0, ge=0, le=64)
    env: dict[str, str] = Field(default_factory=dict)
    launcher: Literal["auto", "torchrun", "plain"] = Field(
        "auto",
        description="torchrun starts the ranks (multi-node rendezvous); plain runs the command once per rank "
        "with the torch.distributed variables set; auto picks torchrun on multi-node clusters",
    )
    time_limit_minutes: int | None = Field(None, ge=1, le=60 * 24 * 60)
    queue: str | None = Field(None, description="Slurm partition or Kubernetes queue name")
    priority_class: str | None = Field(
        None,
        pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
        description="Kubernetes task governance: a Kueue WorkloadPriorityClass of the cluster",
    )
    image: str | None = Field(None, description="Container image (Kubernetes)")
    kind: str | None = Field(
        None, description="Kubernetes job kind: PyTorchJob or HyperPodPyTorchJob"
    )
    namespace: str | None = Field(
        None,
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="Kubernetes namespace (one the admin allows)",
    )
    auto_resume: bool = Field(False, description="Restart on node failure (HyperPod auto-resume)")
    max_retries: int = Field(0, ge=0, le=100)
    efa_per_node: int = Field(0, ge=0, le=32)
    healthy_nodes_only: bool = Field(
        False, description="Only schedule on nodes that passed health checks"
    )
    template: str | None = Field(None, description="The template this spec was built from, if any")
    params: dict[str, Any] = Field(default_factory=dict, description="The template parameters used")
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="Spec fields set on top of what the template built (CLI options such as "
        "--launcher): kept so that a resubmit builds the same spec",
    )
    watchdog: WatchdogSpec | None = Field(
        None, description="Hang and straggler detection; null: the admin's defaults"
    )
    exclude_nodes: list[str] = Field(
        default_factory=list,
        max_length=256,
        description="Nodes the job must not run on (Slurm --exclude, Kubernetes nodeAffinity "
        "NotIn): a resubmit without a suspect node",
    )

    @field_validator("command")
    @classmethod
    def _command_not_blank(cls, value: list[str]) -> list[str]:
        if not value or not value[0].strip():
            raise ValueError("the command needs a program to run")
        if any("\x00" in part for part in value):
            raise ValueError("arguments cannot contain NUL bytes")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not ENV_NAME_PATTERN.match(key):
                raise ValueError(f"'{key}' is not a valid environment variable name")
            if "\x00" in item:
                raise ValueError(f"the value of {key} contains a NUL byte")
        return value

    @field_validator("exclude_nodes")
    @classmethod
    def _node_names(cls, value: list[str]) -> list[str]:
        for node in value:
            if not NODE_NAME_PATTERN.match(node):
                raise ValueError(f"'{node}' is not a node name (letters, digits, '.', '_', '-')")
        return value

    @field_validator("workdir")
    @classmethod
    def _workdir_text(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("the path contains a NUL byte")
        return value

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node


class TemplateSubmission(StrictModel):
    """Submit a job from a template: `params` are checked against the template's parameters."""

    name: str = Field(pattern=JOB_NAME_PATTERN)
    template: str
    params: dict[str, Any] = Field(
        default_factory=dict, description="Only the parameters the user set: the others default"
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="JobSpec fields to set on top of what the template builds (launcher, workdir, "
        "kind, namespace...); env is merged",
    )


class TemplateParam(BaseModel):
    name: str
    title: str
    type: Literal["string", "integer", "number", "boolean", "path", "choice", "text"]
    default: Any = None
    required: bool = False
    description: str = ""
    choices: list[str] | None = None
    minimum: float | None = None
    maximum: float | None = None
    group: str = Field("job", description="Form section: job, resources, training, advanced")
    must_exist: bool = Field(
        False, description="For paths: must name an existing file or directory of the partition"
    )
    program: bool = Field(
        False,
        description="For paths: the program a rank runs: a file, executable unless a .py script",
    )


class TemplateInfo(BaseModel):
    name: str
    title: str
    description: str
    params: list[TemplateParam]


class Rendered(BaseModel):
    format: Literal["command", "sbatch", "manifest"]
    language: Literal["shell", "yaml", "json"]
    text: str = Field(description="Exactly what will be submitted")
    spec: JobSpec = Field(description="The job spec after templates and defaults")
    warnings: list[str] = Field(default_factory=list)
    values: dict[str, Any] = Field(
        default_factory=dict,
        description="For a template: the value each parameter takes (the one given, else the "
        "config file's, else the template's default); null where the program decides",
    )


class RankFault(BaseModel):
    """A fault of one rank as the orchestrator recorded it (HyperPod's faulty pod/rank fields; on
    Slurm, the rank that failed first in an attempt, from the ranks' own records)."""

    restart: int | None = Field(
        description="The job restart this fault caused (1 = the first); null: the job failed on it"
    )
    restart_type: str | None = Field(
        None, description="HyperPod: JLR (job-level restart) or PLR (process-level restart)"
    )
    pod: str | None = None
    node: str | None = Field(None, description="The instance the faulty pod ran on")


class RankInfo(BaseModel):
    rank: int
    node: str | None = None
    state: str | None = None
    exit_code: int | None = None
    restarts: int = 0
    log: str | None = Field(None, description="Where this rank's log is, when it is a file")
    ended: float | None = Field(
        None,
        description="When this rank's process ended (Unix time), where the backend knows it: "
        "which rank failed first",
    )
    faults: list[RankFault] = Field(
        default_factory=list, description="This rank's recorded faults, oldest first"
    )


class JobProgress(BaseModel):
    """How far a running job is, parsed from what it prints (`jupyter_hyperpod/progress.py`)."""

    step: int
    total: int
    fraction: float = Field(ge=0, le=1)
    elapsed_seconds: float | None = None
    eta_seconds: float | None = Field(None, description="Estimated seconds left")
    loss: float | None = Field(None, description="The last training loss printed")
    source: str = Field(
        "", description="What was parsed: training (our step lines), tqdm, log (step N/M)"
    )


class RankClock(BaseModel):
    """One rank's step clock: the last step it printed and when the tracker saw it."""

    rank: int
    node: str | None = None
    step: int | None = Field(None, description="The last step number seen (null: none yet)")
    last_step_at: float | None = Field(None, description="When that step was seen (Unix time)")
    step_seconds: float | None = Field(None, description="The rank's median seconds per step")
    rate: float | None = Field(None, description="Steps per second in the last closed window")


class Straggler(BaseModel):
    rank: int
    node: str | None = None
    rate: float = Field(description="The rank's steps per second in the last window")
    others_rate: float = Field(description="The median rate of the other ranks")
    windows: int = Field(description="Windows in a row it has been this slow")


class JobWatchdog(BaseModel):
    """What the watchdog sees of a running job (`core/watchdog.py`): a state detail, the job
    stays RUNNING."""

    stalled_since: float | None = Field(
        None, description="Set while stalled: the last step on any rank (or the start)"
    )
    stalled_detail: str | None = Field(None, description="Why it counts as stalled")
    bound_seconds: float = Field(description="Seconds without a step that count as a hang now")
    stopped_first: list[RankClock] = Field(
        default_factory=list, description="While stalled: the ranks that stopped first"
    )
    stragglers: list[Straggler] = Field(default_factory=list)
    ranks: list[RankClock] = Field(default_factory=list)
    auto_cancel_at: float | None = Field(
        None, description="While stalled with auto_cancel_minutes: when it will be cancelled"
    )


class OperatorVerdict(BaseModel):
    """The cluster's own watchdog's last verdict on a job, beside ours: HyperPod's training
    operator acting on the job's `logMonitoringConfiguration` (its agent found a rule HANGING or
    SLOW, or a line it faults on). Decided by the backend from the job object's status."""

    state: Literal["HANGING", "SLOW", "FAULTED"]
    rule: str = Field(description="The logMonitoringConfiguration rule that fired")
    reason: str = Field(description="The operator's fault reason, e.g. LogHang_<rule>")
    message: str | None = Field(None, description="The operator's words (the last matched line)")
    at: float | None = Field(None, description="When the operator reported it (Unix time)")
    action: str = Field(
        description="What the operator did: restarted the job (restart N), or failed it"
    )
    ranks: list[int] = Field(default_factory=list, description="The ranks it found faulty")
    nodes: list[str] = Field(default_factory=list, description="Their nodes (instance ids)")


class StackFrame(BaseModel):
    name: str = Field(description="The function")
    filename: str
    line: int
    differs: bool = Field(
        False, description="Not every rank's same thread has this frame at this depth"
    )


class ThreadStack(BaseModel):
    name: str | None = None
    thread_id: int
    active: bool = Field(description="Running (not waiting) when sampled")
    frames: list[StackFrame] = Field(description="Innermost first, as py-spy prints them")


class RankStack(BaseModel):
    rank: int
    node: str | None = None
    pid: int | None = None
    threads: list[ThreadStack] = Field(default_factory=list)
    error: str | None = Field(None, description="Why this rank has no stack")
    fix: str | None = Field(None, description="What to add so that it has one")


class StackDump(BaseModel):
    """A Python stack of every rank (py-spy dump), stored with the job."""

    job_id: str
    taken_at: float
    ranks: list[RankStack]


class SnapshotReference(BaseModel):
    """A large directory (a model's, a data set's) a snapshot names instead of copying."""

    path: str = Field(description="Partition-relative path")
    size: int = Field(description="Bytes below it at submit")
    mtime: float = Field(description="Its newest file's modification time at submit (Unix time)")


class JobSnapshot(BaseModel):
    """What a job ran (#24 item 1): its workdir's files as they were at submit, content-addressed
    in the partition; the job runs from `tree`."""

    tree: str = Field(description="Partition-relative directory the job runs from")
    workdir: str = Field(description="The workdir it was taken from, partition-relative")
    commit: str | None = Field(
        None, description="The git commit, when the workdir is in a repository"
    )
    dirty: bool = Field(
        False, description="Uncommitted changes were in the workdir (and the snapshot)"
    )
    files: int = Field(description="Files copied")
    bytes: int = Field(description="Bytes copied")
    referenced: list[SnapshotReference] = Field(
        default_factory=list, description="Large directories named, not copied"
    )
    configs: list[str] = Field(
        default_factory=list, description="Config files resolved (${VAR} expanded, --set applied)"
    )
    freeze_sha256: str | None = Field(
        None, description="SHA-256 of the cluster interpreter's pip freeze; null when unknown"
    )
    diff_sha256: str | None = Field(None, description="SHA-256 of the uncommitted diff")


class Job(BaseModel):
    id: str
    name: str
    user: str
    orchestrator: str
    backend_id: str | None = Field(
        None, description="Slurm job id, Kubernetes object name, local process group"
    )
    state: JobState
    state_reason: str | None = None
    created: float
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    ranks: list[RankInfo] = Field(default_factory=list)
    spec: JobSpec
    events: list[str] = Field(
        default_factory=list, description="Recent orchestrator events for this job"
    )
    progress: JobProgress | None = Field(
        None, description="Running jobs: step/total, elapsed, ETA and last loss from the log"
    )
    watchdog: JobWatchdog | None = Field(
        None, description="Running jobs: step clocks per rank, hang and stragglers"
    )
    operator_verdict: OperatorVerdict | None = Field(
        None,
        description="The cluster operator's own last hang/slow verdict (HyperPod's training "
        "operator), decided by the backend; null when it has none",
    )
    mlflow_run_url: str | None = None
    snapshot: JobSnapshot | None = Field(
        None, description="What the job ran: its workdir's snapshot at submit; null before #24"
    )
    stale_reason: str | None = Field(
        None,
        description="Set while the orchestrator cannot be asked: why; the state is the last known",
    )
    stale_since: float | None = Field(
        None, description="With stale_reason: when the state was last confirmed (Unix time)"
    )

    @computed_field(  # type: ignore[prop-decorator]  # pydantic docs: mypy does not model it
        description="The rank the job failed on first, decided by the server from the ranks' "
        "faults, exit codes and end times (core/blame.py); null unless FAILED or none is to blame"
    )
    @property
    def failed_rank(self) -> int | None:
        return failed_rank(self.state == JobState.FAILED, self.ranks)


class ForgottenJob(BaseModel):
    """What `DELETE jobs/{id}?forget=true` did."""

    id: str
    cancelled: bool = Field(description="The job was still running and was cancelled first")
    files_deleted: bool = Field(description="The job's directory (logs, launch files) was deleted")
    job_dir: str = Field(description="The job's directory, partition-relative (kept or deleted)")


class JobList(BaseModel):
    jobs: list[Job]
    total: int
    stale_reason: str | None = Field(
        None,
        description="Set while the orchestrator cannot be asked: why; unfinished jobs show their "
        "last known state",
    )
    stale_since: float | None = Field(
        None, description="With stale_reason: when the states were last confirmed (Unix time)"
    )


class LogSnapshot(BaseModel):
    rank: int
    text: str
    start_offset: int = Field(
        description="Byte offset of the first character of text in the rank's log"
    )
    offset: int = Field(description="Byte offset just after text: follow from here")
    truncated: bool = Field(description="True when older lines exist before text")


class MetricPoint(BaseModel):
    step: int
    value: float
    timestamp: float


class MlflowRunInfo(BaseModel):
    run_id: str
    experiment_id: str
    status: str
    url: str | None = Field(
        None,
        description="The run's page in the MLflow UI (an http(s) tracking server, or the "
        "server's mlflow_ui_url); null when the server knows no UI address",
    )


class RougeComparison(BaseModel):
    """One ROUGE variant of an evaluation: the fine-tuned model's mean F1 beside the base's."""

    name: str = Field(description="The ROUGE variant: rouge1, rouge2, rougeL, rougeLsum")
    base: float | None = Field(None, description="The base model's score (null: not scored)")
    finetuned: float | None = Field(None, description="The fine-tuned model's score")
    delta: float | None = Field(None, description="finetuned - base, when both are there")


class EvaluationMetrics(BaseModel):
    """An evaluate job's scores, read from its `eval_<variant>_<model>` MLflow metrics."""

    rouge: list[RougeComparison] = Field(
        description="Every ROUGE variant logged, in order (rouge1, rouge2, rougeL, rougeLsum)"
    )
    samples: int | None = Field(None, description="Test examples scored")
    max_new_tokens: int | None = Field(None, description="The generation length used")
    metric_names: list[str] = Field(
        description="The MLflow metrics these were read from (a view shows them here only)"
    )


class JobMetrics(BaseModel):
    run: MlflowRunInfo | None = None
    metrics: dict[str, list[MetricPoint]] = Field(default_factory=dict)
    message: str | None = Field(None, description="Why no metrics are shown, when none are")
    evaluation: EvaluationMetrics | None = Field(
        None, description="The run's evaluation (fine-tuned vs base ROUGE), when it has one"
    )


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


# -- comparing jobs (#24 item 2: `GET jobs/{a}/diff/{b}`, `GET compare?ids=`) -----------------
class ValueChange(BaseModel):
    """One field, or one config value, that differs between two jobs."""

    field: str = Field(description="Dotted path: 'env.LR', 'resources.nodes', 'lora.r'")
    a: Any = Field(None, description="Its value in the first job (null: absent)")
    b: Any = Field(None, description="Its value in the second job (null: absent)")


ChangeKind = Literal["added", "removed", "changed"]


class ConfigChange(BaseModel):
    """A resolved config file (`${VAR}` expanded, `--set` applied) that differs."""

    name: str = Field(description="The config's path, relative to the workdir")
    status: ChangeKind
    values: list[ValueChange] = Field(
        default_factory=list, description="The values that differ (YAML mappings, flattened)"
    )
    diff: str = Field("", description="Unified diff of the two resolved texts")


class CodeFileChange(BaseModel):
    """A snapshot file added, removed or changed (by SHA-256) between two jobs."""

    path: str = Field(description="Relative to the workdir")
    status: ChangeKind
    a_sha256: str | None = None
    b_sha256: str | None = None
    a_size: int | None = None
    b_size: int | None = None
    diff: str | None = Field(
        None, description="Unified diff (text files under the size cap); null: see note"
    )
    note: str | None = Field(None, description="Why no diff is shown (binary, too large)")


class CodeSide(BaseModel):
    """What one job ran, in short."""

    commit: str | None = None
    dirty: bool = False
    files: int = 0
    bytes: int = 0


class CodeDiff(BaseModel):
    a: CodeSide | None = Field(None, description="Null: the job has no snapshot")
    b: CodeSide | None = None
    files: list[CodeFileChange] = Field(default_factory=list)
    unchanged: int = Field(0, description="Files the same in both")


class PackageChange(BaseModel):
    name: str = Field(description="The package, as pip freeze names it")
    status: ChangeKind
    a: str | None = Field(None, description="Its version (or pip's requirement line) in a")
    b: str | None = None


class EnvironmentDiff(BaseModel):
    a_sha256: str | None = Field(None, description="SHA-256 of a's pip freeze (null: unknown)")
    b_sha256: str | None = None
    same: bool = Field(description="Both known and identical")
    packages: list[PackageChange] = Field(default_factory=list)


class JobDiff(BaseModel):
    """Two jobs side by side: what differs in their spec, configs, code and environment."""

    a: str = Field(description="The first job's id")
    b: str = Field(description="The second job's id")
    spec: list[ValueChange] = Field(default_factory=list)
    configs: list[ConfigChange] = Field(default_factory=list)
    code: CodeDiff
    environment: EnvironmentDiff
    notes: list[str] = Field(
        default_factory=list, description="What could not be compared, and why"
    )


class ComparedJob(BaseModel):
    """One job of a comparison: its outcome, what sets it apart, its final metrics."""

    id: str
    name: str
    state: JobState
    created: float
    duration: float | None = Field(None, description="Seconds from start to end (or to now)")
    exit_code: int | None = None
    commit: str | None = None
    dirty: bool = False
    values: dict[str, Any] = Field(
        default_factory=dict,
        description="Its value of each field in JobComparison.differing (null: absent)",
    )
    final_metrics: dict[str, MetricPoint] = Field(
        default_factory=dict, description="Each MLflow metric's last point (highest step)"
    )
    evaluation: EvaluationMetrics | None = None
    metrics_message: str | None = Field(None, description="Why no metrics, when none")


class JobComparison(BaseModel):
    """Two or more jobs side by side."""

    jobs: list[ComparedJob]
    differing: list[str] = Field(
        default_factory=list,
        description="Spec fields ('resources.nodes') and config values ('train.yaml:lora.r') "
        "that are not the same in every job",
    )
    metrics: list[str] = Field(
        default_factory=list, description="Every final metric any of the jobs has, sorted"
    )
    notes: list[str] = Field(default_factory=list)
