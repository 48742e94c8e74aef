"""The user's jobs on the connected cluster: the job store seen through the (orchestrator,
cluster, user) scope, written once here. Reads, the job bound to its cluster, and the one way a
backend's `JobUpdate` is applied to a record and saved."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .backend import JobUpdate, StoredJob
from .connection import Connection
from .errors import Conflict, NotConnected, NotFound
from .models import Job, JobSpec, JobState
from .partition import check_text
from .registry import state_class
from .store import JobStore

Row = tuple[Job, str, dict[str, Any]]
"""A stored job, the cluster it was submitted to, and its backend data."""

SAVED_FIELDS = (
    "state",
    "state_reason",
    "backend_id",
    "started",
    "ended",
    "exit_code",
    "ranks",
    "events",
)
"""The record's fields a backend's update may change."""

LEFT_BEHIND = (
    "the submission did not complete: the server that submitted it stopped before it recorded "
    "the cluster's answer (a job the cluster took is in its queue, to adopt)"
)

PLACEMENT_WAIT = 30.0
"""Seconds a cancel of a job being handed to the backend waits for the backend's answer."""


class JobBook:
    """One user's job records on the connected cluster (`connection` is read live); `owner`:
    the service's lease in the store, written on every job it stores (`left_behind`)."""

    def __init__(self, store: JobStore, connection: Connection, user: str, owner: str) -> None:
        self.store = store
        self.connection = connection
        self.user = user
        self.owner = owner

    def query(
        self,
        states: Sequence[JobState] | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
    ) -> tuple[list[Row], int]:
        """The user's jobs of the connected cluster, newest first, and how many match."""
        orchestrator, cluster = self.connection.scope()
        return self.store.query(
            orchestrator=orchestrator,
            cluster=cluster,
            user=self.user,
            states=list(states) if states else None,
            limit=limit,
            offset=offset,
        )

    def backend_ids(self) -> dict[str, str]:
        """The cluster's id of each of the user's jobs here -> the job's id."""
        orchestrator, cluster = self.connection.scope()
        return self.store.backend_ids(orchestrator=orchestrator, cluster=cluster, user=self.user)

    def record(self, job_id: str) -> Row | None:
        """The user's stored job of any cluster, or None."""
        check_text(job_id, field="id", what="the job id")  # what the store cannot even look up
        found = self.store.get(job_id)
        if found is None or found[0].user != self.user:
            return None
        return found

    def get(self, job_id: str, *, connected: bool = True) -> tuple[Job, dict[str, Any]]:
        """The stored job and its backend data. A job is bound to the cluster it was submitted
        to: unless `connected` is False (reading its record), one of another cluster than the
        connected one raises NotConnected, so that nothing reaches the wrong cluster."""
        found = self.record(job_id)
        if found is None:
            raise NotFound(f"no job '{job_id}' on this cluster", field="id")
        job, cluster, data = found
        elsewhere = self.elsewhere(job, cluster) if connected else None
        if elsewhere:
            raise NotConnected(elsewhere, field="id")
        return job, data

    def placed(self, job: Job, data: dict[str, Any]) -> bool:
        """Whether the job has reached the cluster, or ended without it. A held job has not;
        nor has one being handed to the backend (a release or a submit under way)."""
        if job.held is not None:
            return False
        return job.state.finished or self.connection.orchestrator.has_job(job, data)

    def get_placed(
        self, job_id: str, *, timeout: float = PLACEMENT_WAIT, poll: float = 0.05
    ) -> tuple[Job, dict[str, Any]]:
        """`get`, once the job is placed on the cluster or ended: one being handed to the
        backend (its hold claimed, never given back) is waited for, as long as a submit may
        take."""
        deadline = time.monotonic() + timeout
        while True:
            job, data = self.get(job_id)
            if self.placed(job, data):
                return job, data
            if self.left_behind(job, data):
                return self.fail_left_behind(job, data), data
            if time.monotonic() >= deadline:
                raise Conflict(
                    f"job '{job_id}' is being started on the cluster: try again in a moment",
                    field="id",
                )
            time.sleep(poll)

    def left_behind(self, job: Job, data: dict[str, Any]) -> bool:
        """A job whose start was under way in a server that stopped (killed between storing
        it and recording the cluster's answer): not held, not placed, its owner's lease gone."""
        if job.held is not None or job.state is not JobState.PENDING or self.placed(job, data):
            return False
        return not self.store.owner_alive(job.id)

    def fail_left_behind(self, job: Job, data: dict[str, Any]) -> Job:
        """Record a job left behind as FAILED, with why (a job the cluster took just before
        is in its queue, to adopt)."""
        return self.save(
            job, data, JobUpdate(state=JobState.FAILED, state_reason=LEFT_BEHIND, ended=time.time())
        )

    def elsewhere(self, job: Job, cluster: str) -> str | None:
        """Why a job is not on the connected cluster (None when it is)."""
        kind, name = self.connection.scope()
        if job.orchestrator == kind and cluster == name:
            return None
        return (
            f"job '{job.id}' belongs to the {job.orchestrator} cluster '{cluster}', and this "
            f"server is connected to the {kind} cluster '{name}': "
            f"connect to '{cluster}' again to follow, cancel or read it"
        )

    def new_job(self, job_id: str, spec: JobSpec, kind: str, **fields: Any) -> Job:
        """A new record of the user's job on a `kind` cluster (PENDING, created now, unless
        `fields` say otherwise), not yet stored."""
        fields.setdefault("state", JobState.PENDING)
        fields.setdefault("created", time.time())
        return Job(
            id=job_id, name=spec.name, user=self.user, orchestrator=kind, spec=spec, **fields
        )

    def insert(self, job: Job, data: dict[str, Any]) -> None:
        """Store a new job, bound to the connected cluster, owned by this service (while it
        hands the job to the cluster, its lease says the start is not one left behind)."""
        self.store.insert(job, self.connection.cluster_name, data, owner=self.owner)

    def save(self, job: Job, data: dict[str, Any], update: JobUpdate) -> Job:
        """Apply a backend's update to the record and store what changed."""
        updated = apply_update(job, update)
        changes: dict[str, Any] = {
            field: getattr(updated, field)
            for field in SAVED_FIELDS
            if getattr(updated, field) != getattr(job, field)
        }
        if update.data is not None:
            state = state_class(job.orchestrator)
            changes["data"] = state.load(data).merged(update.data).stored()
        self.store.update(job.id, **changes)
        return updated


def stored(job: Job, data: dict[str, Any]) -> StoredJob:
    """What a backend sees of a stored job: its data as the backend's typed `State`."""
    return StoredJob(
        id=job.id,
        spec=job.spec,
        state=job.state,
        backend_id=job.backend_id,
        created=job.created,
        started=job.started,
        data=state_class(job.orchestrator).load(data),
        events=list(job.events),
    )


def apply_update(job: Job, update: JobUpdate) -> Job:
    """The job as the update leaves it (a finished state gets its end time)."""
    changes: dict[str, Any] = {}
    for field in ("state", "backend_id", "started", "ended", "exit_code", "ranks", "events"):
        value = getattr(update, field)
        if value is not None:
            changes[field] = value
    if update.state_reason is not None or (update.state is not None and update.state != job.state):
        changes["state_reason"] = update.state_reason
    if changes.get("state") in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED) and not (
        changes.get("ended") or job.ended
    ):
        changes["ended"] = time.time()
    return job.model_copy(update=changes)
