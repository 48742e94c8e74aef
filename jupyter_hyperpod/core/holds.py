"""Jobs that wait before they start (#24 items 3 and 4): the hold engine.

A held job is stored PENDING and not yet started on the cluster; its record says why it waits
(`Job.held`, a short reason the panel shows: "waiting for prepare-ab12 (prepare)"). Gates decide
for each job they apply to: `READY`, `waiting(reason)` or `doomed(reason)`. A held job starts when
every gate that applies to it is ready; it is cancelled with the reason of the first gate that
dooms it. A gate may also judge a job already started on the cluster (a Slurm job that Slurm
holds with `--dependency`): for such a job only a doom counts (it is cancelled on the cluster).

Gates are pluggable (`Gate`, a Protocol): the chain's `after` gate (`core/chains.py`), a sweep's
slot gate. `Releaser.refresh` runs in the tracker's thread after each status refresh, on the
unfinished jobs that refresh just read (no query of its own; when no gate applies to any of them
it only asks each gate's `applies`), and starts at most `max_releases` jobs a refresh.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from .models import Job, JobState

log = logging.getLogger(__name__)

MAX_RELEASES = 16
"""Held jobs started by one refresh at most (the next refresh starts the others)."""
MAX_JUDGED = 256
"""Jobs judged by one refresh at most (oldest first)."""


@dataclass(frozen=True)
class Verdict:
    """A gate's decision on one job."""

    kind: Literal["ready", "waiting", "doomed"]
    reason: str = ""


READY = Verdict("ready")


def waiting(reason: str) -> Verdict:
    """Not yet: `reason` is what the job shows ("waiting for prepare-ab12 (prepare)")."""
    return Verdict("waiting", reason)


def doomed(reason: str) -> Verdict:
    """Never: the job is cancelled with `reason` ("prepare failed: exit code 1")."""
    return Verdict("doomed", reason)


class JobLookup(Protocol):
    """The user's stored jobs, any state (what gates read about other jobs)."""

    def record(self, job_id: str) -> Job | None: ...

    def records(self, *, states: Sequence[JobState] | None = None) -> list[Job]: ...


@runtime_checkable
class Gate(Protocol):
    """One reason a job may have to wait. `applies` must be cheap (the job's own fields): it is
    asked of every unfinished job at every refresh; `decide` only of those it applies to."""

    name: str

    def applies(self, job: Job) -> bool: ...

    def decide(self, job: Job, jobs: JobLookup) -> Verdict: ...


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """Every gate's verdict as one: the first doom, else the waits' reasons, else ready."""
    waits: list[str] = []
    for verdict in verdicts:
        if verdict.kind == "doomed":
            return verdict
        if verdict.kind == "waiting":
            waits.append(verdict.reason)
    return waiting("; ".join(waits)) if waits else READY


@dataclass
class Released:
    """What one `Releaser.refresh` did (job ids)."""

    started: list[str] = field(default_factory=list)
    doomed: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)


class HoldStore(Protocol):
    """What the releaser changes in the job store (the service's `JobStore`)."""

    def claim_held(self, job_id: str, owner: str) -> bool:
        """Clear the hold of a still held PENDING job, `owner` its new owner; True for the one
        caller that did."""
        ...

    def set_held(self, job_id: str, reason: str) -> None: ...


class Releaser:
    """Judges jobs with the gates, starts the ready held ones, cancels the doomed ones.

    `start(job_id)`: start a stored, not yet started job on the cluster (its hold already
    claimed); `cancel(job, reason)`: end a job CANCELLED with the reason (on the cluster too
    when it was started there)."""

    def __init__(
        self,
        store: HoldStore,
        jobs: JobLookup,
        *,
        start: Callable[[str], object],
        cancel: Callable[[Job, str], object],
        owner: str,
        gates: Sequence[Gate] = (),
        max_releases: int = MAX_RELEASES,
    ) -> None:
        self.store = store
        self.owner = owner
        """This service's lease (`JobStore.renew_lease`): the owner of the jobs it releases."""
        self.jobs = jobs
        self.start = start
        self.cancel = cancel
        self.gates: list[Gate] = list(gates)
        self.max_releases = max_releases
        self._lock = threading.Lock()
        """One refresh at a time (the tracker's thread, or a submit's nudge)."""

    def add_gate(self, gate: Gate) -> None:
        if any(existing.name == gate.name for existing in self.gates):
            raise ValueError(f"a gate named {gate.name!r} is already there")
        self.gates.append(gate)

    def gated(self, job: Job) -> bool:
        """Whether any gate applies to the job."""
        return any(gate.applies(job) for gate in self.gates)

    def judge(self, job: Job) -> Verdict:
        """Every applicable gate's verdict on the job, combined (READY when none applies)."""
        return combine(gate.decide(job, self.jobs) for gate in self.gates if gate.applies(job))

    def refresh(self, jobs: Iterable[Job]) -> Released:
        """Judge the unfinished jobs a status refresh just read: start the ready held ones
        (oldest first, at most `max_releases`), cancel the doomed, update the waits' reasons."""
        done = Released()
        candidates = [job for job in jobs if not job.state.finished and self.gated(job)]
        if not candidates:
            return done
        candidates.sort(key=lambda job: (job.created, job.id))
        with self._lock:
            for job in candidates[:MAX_JUDGED]:
                current = self.jobs.record(job.id)  # an earlier release or doom may change it
                if current is None or current.state.finished:
                    continue
                verdict = self.judge(current)
                if verdict.kind == "doomed":
                    if current.held is None or self.store.claim_held(current.id, self.owner):
                        self.cancel(current, verdict.reason)
                        done.doomed.append(current.id)
                elif current.held is None:
                    continue  # started on the cluster, which holds it: only a doom counts
                elif verdict.kind == "waiting":
                    if verdict.reason != current.held:
                        self.store.set_held(current.id, verdict.reason)
                    done.waiting.append(current.id)
                elif len(done.started) < self.max_releases and self.store.claim_held(
                    current.id, self.owner
                ):
                    try:
                        self.start(current.id)
                    except Exception:  # start records its own failure on the job
                        log.exception("the release of held job %s failed", current.id)
                    done.started.append(current.id)
        return done
