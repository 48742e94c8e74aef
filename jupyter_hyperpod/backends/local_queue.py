"""The local cluster's queue: the jobs of every server that shares this job store (other users'
servers on this machine included), read from the store itself; their logs are shown only where
the files' permissions let this user read them."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.models import Job, JobState
from ..core.queue import ACTIVE_STATES, QueueJob, QueueSnapshot
from ..core.store import JobStore
from .access import log_access

if TYPE_CHECKING:
    from ..core.identity import Identity
    from .local import LocalOrchestrator

SOURCE = "job store"
_stores: dict[str, JobStore] = {}
_lock = threading.Lock()


def _store(path: str) -> JobStore:
    with _lock:
        if path not in _stores:
            _stores[path] = JobStore(path)
        return _stores[path]


def row_from_job(job: Job, data: dict[str, Any], identity: Identity, waiting: str) -> QueueJob:
    """One stored job; mine when its processes run as this server's uid (the OS user), recorded
    at submit (`LocalState.uid`): a row without it is nobody's here."""
    log = str(Path(data["job_dir"]) / "rank-0.log") if data.get("job_dir") else None
    uid = data.get("uid")
    mine = identity.owns_uid(uid if isinstance(uid, int) else None)
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


def list_queue(backend: LocalOrchestrator) -> QueueSnapshot:
    store = _store(str(backend.settings.job_store))
    rows = store.everyone(
        orchestrator="local", cluster=backend.cluster_name(), states=list(ACTIVE_STATES)
    )
    identity = backend.identity
    return QueueSnapshot(
        jobs=[row_from_job(job, data, identity, backend._queue_reason()) for job, _, data in rows],
        source=SOURCE,
    )
