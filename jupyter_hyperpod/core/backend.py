"""The one interface every orchestrator implements (local, Slurm, Kubernetes): the port the
service drives, part of the ground; the backends in `jupyter_hyperpod/backends/` implement it.

Backends are plain synchronous Python (subprocess, HTTP clients): the server runs them in a
thread pool, the CLI and the magics call them directly. They never see Tornado.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from traitlets.config import LoggingConfigurable

from .api import DiagnosticCheck
from .byo import FileContext, PreparedFile
from .errors import InvalidRequest
from .gpu_models import GpuPlacement
from .identity import Identity, identity_of
from .models import (
    Capabilities,
    Job,
    JobProgress,
    JobSpec,
    JobState,
    Node,
    RankInfo,
    WatchCacheStatus,
)
from .queue import Adoption, QueueJob, QueueSnapshot
from .state import BackendState, register_state
from .store import JobStore

JobPython = Literal["server", "cluster_python", "image"]


@dataclass
class Launch:
    """A validated job ready for a backend: paths already translated to where the cluster sees them."""

    job_id: str
    spec: JobSpec
    user: str
    command: list[str]
    """The program argv, cluster paths; a leading `.py` is NOT yet prefixed with python."""
    workdir: str
    """Absolute working directory as the cluster sees it."""
    job_dir: str
    """Absolute directory for this job's logs and state as the cluster sees it (on the shared FS)."""
    job_dir_local: Path
    """The same directory as this machine sees it."""
    env: dict[str, str] = field(default_factory=dict)
    """User env plus HYPERPOD_JOB_ID, HYPERPOD_JOB_DIR, MLFLOW_TRACKING_URI... (cluster paths)."""
    after_ids: tuple[str, ...] = ()
    """`holds_dependencies` backends: the cluster ids of the unfinished jobs it waits for
    (`JobSpec.after`, core/chains.py); the backend holds it until they end."""
    after_any: bool = False
    """With after_ids: start once they ended, whatever their state (else only if they succeeded)."""
    rendered: RenderedJob | None = None
    """The render the submission checked this launch with (`Submission.prepare`): a backend that
    submits its rendered text submits this one (the spec is rendered once per submit)."""


@dataclass
class JobUpdate:
    """What a backend learned about a job; None means unchanged."""

    state: JobState | None = None
    state_reason: str | None = None
    backend_id: str | None = None
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    ranks: list[RankInfo] | None = None
    events: list[str] | None = None
    data: BackendState | None = None
    """Backend-private facts to keep with the job: the backend's `State` with only what
    changed set (`State(pid=12)`, validated as it is built), merged into the stored state."""

    def __post_init__(self) -> None:
        if self.data is not None and not isinstance(self.data, BackendState):
            raise TypeError(
                "JobUpdate.data is the backend's State with what changed set "
                f"(e.g. State(pid=12)), not {type(self.data).__name__}"
            )


@dataclass
class StoredJob:
    """What backends get back for status, cancel and logs: the public job plus private data."""

    id: str
    spec: JobSpec
    state: JobState
    backend_id: str | None
    created: float
    started: float | None
    data: Any
    """The backend's own `State` model (`core/state.py`), loaded from the store."""
    events: list[str] = field(default_factory=list)
    """The job's recent events as stored (a backend adds to them in its JobUpdate)."""


@dataclass
class RenderedJob:
    format: Literal["command", "sbatch", "manifest"]
    language: Literal["shell", "yaml", "json"]
    text: str
    warnings: list[str] = field(default_factory=list)


class LogReader(ABC):
    """Random access to one rank's log as bytes. Offsets are byte offsets into that log."""

    @abstractmethod
    def size(self) -> int:
        """Bytes available now (0 before the rank has started)."""

    @abstractmethod
    def read(self, offset: int, max_bytes: int) -> bytes:
        """Up to max_bytes from offset; b'' when nothing new."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (streams, threads)."""

    def tail(self, lines: int, block: int = 64 * 1024) -> tuple[bytes, int, int]:
        """The last `lines` lines as (data, start_offset, end_offset), reading backwards by blocks."""
        end = self.size()
        start = end
        data = b""
        while start > 0:
            step = min(block, start)
            start -= step
            data = self.read(start, step) + data
            # One more newline than lines, ignoring a trailing newline, means we have enough.
            if data.count(b"\n", 0, len(data) - 1 if data.endswith(b"\n") else len(data)) >= lines:
                break
        body = data[:-1] if data.endswith(b"\n") else data
        cut = len(body)
        for _ in range(lines):
            cut = body.rfind(b"\n", 0, cut)
            if cut < 0:
                break
        if cut >= 0 and lines > 0:
            start += cut + 1
            data = data[cut + 1 :]
        elif lines <= 0:
            start, data = end, b""
        return data, start, end


class DeferredLogReader(LogReader):
    """The log of a job not started anywhere yet (a held job, core/holds.py): empty until
    `opener` gives the started job's reader (None while it is still held), then that one's."""

    def __init__(self, opener: Callable[[], LogReader | None]) -> None:
        self.opener = opener
        self.real: LogReader | None = None

    def _reader(self) -> LogReader | None:
        if self.real is None:
            self.real = self.opener()
        return self.real

    def size(self) -> int:
        reader = self._reader()
        return reader.size() if reader is not None else 0

    def read(self, offset: int, max_bytes: int) -> bytes:
        reader = self._reader()
        return reader.read(offset, max_bytes) if reader is not None else b""

    def close(self) -> None:
        if self.real is not None:
            self.real.close()


class FileLogReader(LogReader):
    """A log that is a file (local ranks, Slurm output files, Kubernetes spool files)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._handle: Any = None
        self.guard: Callable[[int], None] | None = None
        """Called with the descriptor once the file is open (the service's partition check)."""

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def read(self, offset: int, max_bytes: int) -> bytes:
        if self._handle is None:
            try:
                self._handle = open(self.path, "rb")  # noqa: SIM115 - kept open while following
            except OSError:
                return b""
            if self.guard is not None:
                try:
                    self.guard(self._handle.fileno())
                except BaseException:
                    self.close()
                    raise
        self._handle.seek(offset)
        return self._handle.read(max_bytes)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def ranks_nodes(job: Job) -> tuple[str, ...]:
    """The nodes its ranks ran on, as the backend recorded them."""
    return tuple(sorted({rank.node for rank in job.ranks if rank.node}))


class Orchestrator(LoggingConfigurable):
    """A cluster that runs jobs. Subclasses are traitlets Configurables: `c.<ClassName>.<trait>`.

    Every method but `details` and `close` must be implemented (traitlets' metaclass rules out ABC).
    """

    kind: ClassVar[str]
    """The registry's name of this backend (`orchestrator = ...`); a third party's is its own."""
    default_cluster_fs_root: ClassVar[str | None] = None
    """Where jobs see the shared file system when the settings do not say; None: same as this machine."""
    status_poll_max: ClassVar[float] = 30.0
    """The longest wait between two status refreshes while jobs run (the interval grows with the
    age of the youngest job up to this; `core/tracker.py`)."""
    State: ClassVar[type[BackendState]] = BackendState
    """What this backend keeps with each job (`StoredJob.data`): its own pydantic model."""
    jobs_run_here: ClassVar[bool] = False
    """Its jobs run on this server's machine: this machine's GPUs, files and Python are the
    cluster's (no shared mount needed, no AWS)."""
    needs_aws: ClassVar[bool] = False
    """Its API is reached with AWS credentials (EKS tokens): `diagnose` fails without them."""
    job_python: ClassVar[JobPython] = "cluster_python"
    """Where the templates' jobs find their interpreter: this server's own (`server`),
    `HyperPodSettings.cluster_python` on nodes that share this login node's software
    (`cluster_python`), or the job's image (`image`: only a pod can check it)."""

    holds_dependencies: ClassVar[bool] = False
    """It holds a job until the jobs it waits for end, given their cluster ids (`Launch.after_ids`:
    Slurm `--dependency`); elsewhere the server holds it (`core/holds.py`)."""

    queues_in_job_store: ClassVar[bool] = False
    """It queues its jobs itself, in the service's job store (local): `bind_store` is called
    with the store and the service's lease before any job is submitted."""

    def bind_store(self, store: JobStore, owner: str) -> None:
        """The shared job store and this service's lease (`queues_in_job_store` backends)."""

    @classmethod
    def reported_progress(cls, job: Job, data: dict[str, Any]) -> JobProgress | None:
        """The progress the cluster itself reports for the job (Kubeflow Trainer's
        trainerStatus), read before its log; None: the cluster reports none."""
        return None

    @classmethod
    def has_job(cls, job: Job, data: dict[str, Any]) -> bool:
        """Whether its submit's answer is recorded (before it, a stored job is being handed to
        the backend: a held job's release, or a submit, under way; or was, by a server that
        stopped). By default: its id here; a backend whose submit may answer without an id (a
        job it queues) says it from its own state."""
        return job.backend_id is not None

    @classmethod
    def gpu_placement(cls, job: Job, data: dict[str, Any]) -> GpuPlacement:
        """Where the job's GPUs are (for its GPU figures): by default, its ranks' nodes."""
        return GpuPlacement(nodes=ranks_nodes(job), this_machine=cls.jobs_run_here)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "State" in cls.__dict__ and "kind" in cls.__dict__:
            register_state(cls.kind, cls.State)

    def __init__(self, *, settings: Any, identity: Identity | None = None, **kwargs: Any) -> None:
        super().__init__(parent=settings, **kwargs)
        self.settings = settings
        self.identity = identity or identity_of(settings)
        """Who the user is, as this cluster sees it (`core/identity.py`): "mine", adoption,
        cancel and others' logs use it, never a display name compared with a POSIX one."""

    def cluster_name(self) -> str:
        raise NotImplementedError

    def capabilities(self) -> Capabilities:
        raise NotImplementedError

    def details(self) -> dict[str, Any]:
        """Backend-specific facts for `GET cluster` (AWS ARN, Slurm version...)."""
        return {}

    def watch_cache_status(self) -> WatchCacheStatus | None:
        """The backend's watch cache for `GET cluster` (in memory, no I/O); None without one."""
        return None

    def list_nodes(self) -> list[Node]:
        raise NotImplementedError

    def render(self, launch: Launch) -> RenderedJob:
        """Exactly what `submit` would send, for the preview."""
        raise NotImplementedError

    def submit(self, launch: Launch) -> JobUpdate:
        """Start (or queue) the job; returns at least backend_id and state."""
        raise NotImplementedError

    # -- the user's own files (core/byo.py) -----------------------------------------------
    def prepare_file(self, context: FileContext) -> PreparedFile:
        """A user's manifest or sbatch script, read in this backend's format, checked with its
        schemas and the admin's policy, marked as ours: what `submit_file` would send."""
        raise InvalidRequest(
            f"the {self.kind} cluster runs no manifest or sbatch script: submit the program "
            "(a template or a command) instead",
            field="text",
        )

    def submit_file(self, prepared: PreparedFile, context: FileContext) -> JobUpdate:
        """Send a prepared file; the job is then tracked like an adopted one."""
        raise NotImplementedError

    def refresh(self, jobs: list[StoredJob]) -> dict[str, JobUpdate]:
        """Current status of unfinished jobs in ONE batched query; keyed by job id."""
        raise NotImplementedError

    def cancel(self, job: StoredJob) -> JobUpdate:
        raise NotImplementedError

    def log_reader(self, job: StoredJob, rank: int) -> LogReader:
        raise NotImplementedError

    def diagnose(self) -> list[DiagnosticCheck]:
        """This backend's login-node checks (for `doctor` and `GET diagnose`): what it needs from
        this machine and the cluster, each with its fix. Quick: every probe has a time limit."""
        return []

    # -- the cluster's queue (core/queue.py) --------------------------------------------
    def queue(self) -> QueueSnapshot:
        """Every job the cluster reports, all users, in one query (read-only rows)."""
        raise NotImplementedError

    def adopt(self, queue_id: str) -> Adoption:
        """One of the user's jobs submitted elsewhere, as a job of this server (Forbidden when
        it is someone else's, NotFound when the cluster does not know it)."""
        raise NotImplementedError

    def claim_hint(self, row: QueueJob) -> str | None:
        """How I make a row of the queue mine when the cluster records no owner for it (a
        Kubernetes job applied with kubectl); None where the cluster's own identity decides."""
        return None

    def queue_log(self, row: QueueJob, tail: int) -> bytes:
        """The last `tail` lines of a queue row's log, only when `row.logs_readable`."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop background threads."""
