"""The cluster's queue: every job the orchestrator reports, not only the ones submitted here.

Backends list their queue as `QueueJob` rows (one `squeue --json`, the job objects of the
readable namespaces, the shared job store); this module filters and pages them, and explains where
a pending job stands: its place among the pending jobs of its partition or queue (in the order the
scheduler considers them: priority, then submission) and the running jobs holding the resources.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from .models import JobSpec, JobState, StrictModel
from .state import BackendState

QUEUE_TTL_SECONDS = 2.0
"""A queue snapshot is reused this long: pages and filters of one view cost one cluster query."""
MAX_QUEUE_LIMIT = 1000
ACTIVE_STATES = (JobState.PENDING, JobState.RUNNING)


class QueueJob(BaseModel):
    """One job of the cluster's queue, as the cluster shows it to every user."""

    id: str = Field(
        description="The cluster's id: the Slurm job id, '<namespace>/<kind>/<name>' on Kubernetes, "
        "the job id on local"
    )
    name: str
    user: str = Field(description="Who submitted it (Slurm user, Kubernetes creator or label)")
    state: JobState
    native_state: str = Field(description="The orchestrator's own state word")
    reason: str | None = Field(None, description="Why it waits (pending jobs), as the cluster says")
    position: int | None = Field(
        None, description="1-based place among the pending jobs of its partition/queue"
    )
    explanation: str | None = Field(
        None,
        description="For my pending jobs: where they are in the queue and what holds the resources",
    )
    nodes: int = Field(0, description="Nodes held (running) or asked for (pending)")
    node_list: str | None = None
    gpus: int = Field(0, description="GPUs held (running) or asked for (pending)")
    partition: str | None = Field(None, description="Slurm partition or Kubernetes queue")
    namespace: str | None = None
    kind: str | None = Field(None, description="Kubernetes job kind")
    priority: int | None = None
    priority_class: str | None = Field(None, description="Kueue priority class (Kubernetes)")
    submitted: float | None = None
    started: float | None = None
    mine: bool = False
    job_id: str | None = Field(
        None, description="The job's id in this server's job list, when submitted here or adopted"
    )
    adoptable: bool = Field(
        False, description="Mine, submitted elsewhere and not adopted yet: can be opened here"
    )
    logs_readable: bool = Field(
        False, description="The cluster lets this user read the job's logs (checked)"
    )
    logs_reason: str | None = Field(None, description="Why the logs cannot be read, when not")
    log: str | None = Field(
        None, description="The log file, as the cluster shows it to everyone (Slurm StdOut)"
    )


class QueuePage(BaseModel):
    jobs: list[QueueJob]
    total: int = Field(description="Jobs matching the filters")
    offset: int
    limit: int
    counts: dict[str, int] = Field(
        default_factory=dict, description="Jobs per state in the whole queue, before filters"
    )
    partitions: list[str] = Field(
        default_factory=list, description="Partitions/queues seen, for the filter"
    )
    source: str = Field(description="Where the rows come from, e.g. 'squeue --json'")
    fetched: float = Field(description="When the cluster was asked (epoch seconds)")


class AdoptRequest(StrictModel):
    id: str = Field(min_length=1, max_length=400, description="A queue row's id")


class QueueLogs(BaseModel):
    id: str
    text: str
    truncated: bool


@dataclass
class Adoption:
    """What a backend returns to adopt one of the user's jobs submitted elsewhere."""

    backend_id: str
    spec: JobSpec
    data: BackendState
    """The backend's own state model for the job, as its refresh will read it."""
    events: list[str] = field(default_factory=list)
    state: JobState = JobState.PENDING
    created: float = field(default_factory=time.time)
    started: float | None = None


@dataclass
class QueueSnapshot:
    jobs: list[QueueJob]
    source: str
    fetched: float = field(default_factory=time.time)
    taken: float = field(default_factory=time.monotonic)


def parse_states(value: str | Iterable[str] | None) -> list[JobState] | None:
    """'PENDING,running' -> states; 'all' -> None (everything); '' -> the active states."""
    parts = (
        [p for p in value.split(",") if p.strip()] if isinstance(value, str) else list(value or [])
    )
    if not parts:
        return list(ACTIVE_STATES)
    if any(p.strip().lower() == "all" for p in parts):
        return None
    states = []
    for part in parts:
        try:
            states.append(JobState(part.strip().upper()))
        except ValueError:
            allowed = ", ".join(s.value for s in JobState)
            from .errors import InvalidRequest

            raise InvalidRequest(
                f"state must be 'all' or among {allowed}, not '{part}'", field="state"
            ) from None
    return states


def scheduling_order(job: QueueJob) -> tuple[int, float, str]:
    """The order a scheduler considers pending jobs: higher priority first, then older."""
    return (-(job.priority or 0), job.submitted or 0.0, _numeric(job.id))


def _numeric(value: str) -> str:
    return value.rjust(20, "0") if value.isdigit() else value


def place_pending(jobs: list[QueueJob]) -> QueueOrder:
    """Set `position` of every pending job within its partition/queue; returns the order."""
    order = QueueOrder.of(jobs)
    for job in jobs:
        if job.id in order.place and job.state is JobState.PENDING:
            job.position = order.place[job.id] + 1
    return order


def _ordinal(number: int) -> str:
    suffix = (
        "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    )
    return f"{number}{suffix}"


def _holding(job: QueueJob) -> str:
    parts = [f"{job.nodes} node{'s' if job.nodes != 1 else ''}"]
    if job.gpus:
        parts.append(f"{job.gpus} GPU{'s' if job.gpus != 1 else ''}")
    return f"{job.id} {job.name} ({job.user}, {', '.join(parts)})"


@dataclass
class QueueOrder:
    """Each partition's pending jobs in scheduling order and its running jobs, computed once per
    snapshot (explaining every pending job of mine costs one pass, not one sort each)."""

    pending: dict[str | None, list[QueueJob]]
    place: dict[str, int]
    running: dict[str | None, list[QueueJob]]

    @classmethod
    def of(cls, jobs: list[QueueJob]) -> QueueOrder:
        pending: dict[str | None, list[QueueJob]] = {}
        running: dict[str | None, list[QueueJob]] = {}
        for job in jobs:
            if job.state is JobState.PENDING:
                pending.setdefault(job.partition, []).append(job)
            elif job.state is JobState.RUNNING:
                running.setdefault(job.partition, []).append(job)
        place: dict[str, int] = {}
        for members in pending.values():
            members.sort(key=scheduling_order)
            for index, job in enumerate(members):
                place[job.id] = index
        for members in running.values():
            members.sort(key=lambda j: (-(j.gpus or 0), -(j.nodes or 0), j.started or 0.0))
        return cls(pending=pending, place=place, running=running)


def explain(
    job: QueueJob,
    jobs: list[QueueJob] | QueueOrder,
    *,
    now: float | None = None,
    keep: int = 3,
) -> str:
    """Where a pending job is in its queue and what holds the resources it waits for."""
    order = jobs if isinstance(jobs, QueueOrder) else QueueOrder.of(jobs)
    where = job.partition or "the queue"
    pending = order.pending.get(job.partition, [])
    index = order.place.get(job.id, len(pending))
    ahead = pending[:index]
    running = order.running.get(job.partition, [])
    text = f"{_ordinal(index + 1)} of {len(pending)} pending on {where}"
    if job.reason:
        text = f"{job.reason}: {text}"
    if ahead:
        shown = ", ".join(_holding(j) for j in ahead[:keep])
        more = f" and {len(ahead) - keep} more" if len(ahead) > keep else ""
        text += f"; ahead: {shown}{more}"
    if running:
        now = time.time() if now is None else now
        held_nodes = sum(j.nodes for j in running)
        held_gpus = sum(j.gpus for j in running)
        shown = ", ".join(
            _holding(j) + (f" for {_duration(now - j.started)}" if j.started else "")
            for j in running[:keep]
        )
        more = f" and {len(running) - keep} more" if len(running) > keep else ""
        gpus = f", {held_gpus} GPUs" if held_gpus else ""
        text += f"; {len(running)} running job(s) hold {held_nodes} nodes{gpus}: {shown}{more}"
    else:
        text += "; no job is running there"
    return text


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def select(
    jobs: list[QueueJob],
    *,
    mine: bool,
    states: list[JobState] | None,
    partition: str | None,
) -> list[QueueJob]:
    wanted = set(states) if states else None
    return [
        j
        for j in jobs
        if (not mine or j.mine)
        and (wanted is None or j.state in wanted)
        and (not partition or j.partition == partition or j.namespace == partition)
    ]


def counts(jobs: list[QueueJob]) -> dict[str, int]:
    result: dict[str, int] = {}
    for job in jobs:
        result[job.state.value] = result.get(job.state.value, 0) + 1
    return result
