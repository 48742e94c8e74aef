"""The local cluster's queue: the jobs of every server that shares this job store (other users'
servers on this machine included), read from the store itself; their logs are shown only where
the files' permissions let this user read them."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.models import Job, JobState
from ..core.queue import ACTIVE_STATES, QueueJob, QueueSnapshot
from ..core.store import JobStore
from .access import log_access
from .local_state import LocalState

if TYPE_CHECKING:
    from ..core.identity import Identity

SOURCE = "job store"


def row_from_job(job: Job, state: LocalState, identity: Identity, waiting: str) -> QueueJob:
    """One stored job; mine when its processes run as this server's uid (the OS user), recorded
    at submit (`LocalState.uid`): a row without it is nobody's here."""
    log = str(Path(state.job_dir) / "rank-0.log") if state.job_dir else None
    mine = identity.owns_uid(state.uid)
    readable, why = log_access(log, identity, mine)
    return QueueJob(
        id=job.id,
        name=job.name,
        user=job.user,
        state=job.state,
        native_state=job.state.value,
        # The backend's own words: the stored reason holds the queue explanation made from these.
        reason=waiting if job.state is JobState.PENDING else None,
        nodes=job.spec.nodes,
        node_list=socket.gethostname() if job.started else None,
        gpus=job.spec.gpus_per_node * job.spec.nodes,
        partition="local",
        submitted=job.created,
        started=job.started,
        mine=mine,
        job_id=job.id if mine else None,
        logs_readable=readable,
        logs_reason=why,
        log=log,
    )


def list_queue(
    store: JobStore,
    *,
    kind: str,
    cluster: str,
    identity: Identity,
    waiting: str,
) -> QueueSnapshot:
    """Every server's active jobs of this cluster in the shared job `store` (the one the
    backend is bound to); `waiting`: why a pending one waits, in the backend's words."""
    rows = store.everyone(orchestrator=kind, cluster=cluster, states=list(ACTIVE_STATES))
    return QueueSnapshot(
        jobs=[row_from_job(job, LocalState.load(data), identity, waiting) for job, _, data in rows],
        source=SOURCE,
    )
