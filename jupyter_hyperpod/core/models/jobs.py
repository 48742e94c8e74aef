"""A submitted job as the server records and reports it: its ranks and their faults, progress,
watchdog view, the operator's verdict, stack dumps, the snapshot of what it ran, and job lists."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field

from ..blame import failed_rank
from .common import JobState
from .specs import JobSpec


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
    held: str | None = Field(
        None,
        description="Why the server holds this PENDING job before it starts it on the cluster "
        "('waiting for prepare-1a2b3c (prepare)'); null once started (#24 holds)",
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
