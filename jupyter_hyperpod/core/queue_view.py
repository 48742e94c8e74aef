"""The queue as the service serves it: one backend query per snapshot (reused for a couple of
seconds by every page and filter), the rows marked with what this user may do, my pending jobs
explained, and adoption of my jobs submitted elsewhere into the job store."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from .connection import Connection
from .errors import Forbidden, HyperPodError, InvalidRequest, NotFound, validation_error
from .jobbook import JobBook
from .models import Job, JobState
from .paths import ClusterPaths
from .queue import (
    MAX_QUEUE_LIMIT,
    QUEUE_TTL_SECONDS,
    AdoptRequest,
    QueueJob,
    QueueLogs,
    QueuePage,
    QueueSnapshot,
    counts,
    explain,
    parse_states,
    place_pending,
    select,
)

MAX_LOG_TAIL = 10_000
STALE_SECONDS = 30.0
"""An older snapshot is never shown: the page waits for the cluster."""
log = logging.getLogger(__name__)


class QueueView:
    """`job(job_id)`: a stored job as the job routes show it; `refresh()`: refresh the job
    states now (an adopted job shows its state at once)."""

    def __init__(
        self,
        connection: Connection,
        book: JobBook,
        paths: ClusterPaths,
        *,
        job: Callable[[str], Job],
        refresh: Callable[[], None],
    ) -> None:
        self.connection = connection
        self.book = book
        self.paths = paths
        self.job = job
        self.refresh = refresh
        self._lock = threading.Lock()
        self._snapshot: QueueSnapshot | None = None
        self._kind: str | None = None
        self._taking = threading.Lock()
        self._refreshing = False

    def invalidate(self) -> None:
        with self._lock:
            self._snapshot = None

    def snapshot(self, *, max_age: float = QUEUE_TTL_SECONDS) -> QueueSnapshot:
        """The queue now, or the one taken less than max_age seconds ago on the same backend.
        A snapshot older than that but younger than STALE_SECONDS is answered at once while a
        new one is taken in the background (a page never waits for squeue twice in a row);
        max_age=0 always asks the cluster."""
        current = self._current()
        if current is not None:
            age = time.monotonic() - current.taken
            if age < max_age:
                return current
            if max_age > 0 and age < STALE_SECONDS:
                self._refresh_soon()
                return current
        return self._take()

    def _current(self) -> QueueSnapshot | None:
        with self._lock:
            if self._snapshot is not None and self._kind == self.connection.kind:
                return self._snapshot
        return None

    def _take(self) -> QueueSnapshot:
        """One cluster query at a time: a caller that arrives while one runs gets its result."""
        started = time.monotonic()
        with self._taking:
            current = self._current()
            if current is not None and current.taken >= started:
                return current
            orchestrator = self.connection.orchestrator
            snapshot = orchestrator.queue()
            self._mark(snapshot)
            with self._lock:
                self._snapshot, self._kind = snapshot, orchestrator.kind
            return snapshot

    def _refresh_soon(self) -> None:
        with self._lock:
            if self._refreshing:
                return
            self._refreshing = True

        def refresh() -> None:
            try:
                self._take()
            except HyperPodError as error:
                log.info("queue refresh failed: %s", error.message)
            except Exception:
                log.exception("queue refresh failed")
            finally:
                with self._lock:
                    self._refreshing = False

        threading.Thread(target=refresh, name="hyperpod-queue", daemon=True).start()

    def _mark(self, snapshot: QueueSnapshot) -> None:
        known = self.book.backend_ids()
        order = place_pending(snapshot.jobs)
        now = time.time()
        for row in snapshot.jobs:
            if row.mine:
                row.job_id = row.job_id or known.get(row.id)
                row.adoptable = row.job_id is None
                if row.state is JobState.PENDING:
                    row.explanation = explain(row, order, now=now)

    def page(
        self,
        *,
        mine: bool = False,
        state: str | list[str] | None = "",
        partition: str | None = None,
        offset: int = 0,
        limit: int = 100,
        fresh: bool = False,
    ) -> QueuePage:
        if not 1 <= limit <= MAX_QUEUE_LIMIT:
            raise InvalidRequest(f"limit must be between 1 and {MAX_QUEUE_LIMIT}", field="limit")
        if offset < 0:
            raise InvalidRequest("offset cannot be negative", field="offset")
        states = parse_states(state)
        snapshot = self.snapshot(max_age=0 if fresh else QUEUE_TTL_SECONDS)
        rows = select(snapshot.jobs, mine=mine, states=states, partition=partition or None)
        return QueuePage(
            jobs=rows[offset : offset + limit],
            total=len(rows),
            offset=offset,
            limit=limit,
            counts=counts(snapshot.jobs),
            partitions=sorted({j.partition for j in snapshot.jobs if j.partition}),
            source=snapshot.source,
            fetched=snapshot.fetched,
        )

    def row(self, queue_id: str, *, fresh: bool = False) -> QueueJob:
        snapshot = self.snapshot(max_age=0 if fresh else QUEUE_TTL_SECONDS)
        for row in snapshot.jobs:
            if row.id == queue_id:
                return row
        if not fresh:
            return self.row(queue_id, fresh=True)
        raise NotFound(f"the cluster's queue has no job '{queue_id}'", field="id")

    def adopt(self, queue_id: str) -> Job:
        """Record one of my jobs submitted elsewhere in the job store: it then opens, follows,
        shows metrics and cancels like a job submitted here (and survives restarts)."""
        orchestrator = self.connection.orchestrator
        row = self.row(queue_id)
        if not row.mine:
            hint = orchestrator.claim_hint(row) if not row.user else None
            raise Forbidden(
                f"job {row.id} belongs to {row.user or 'nobody this cluster names'}: others' "
                f"jobs are read-only{f' ({hint})' if hint else ''}",
                field="id",
            )
        if row.job_id:
            return self.job(row.job_id)
        adoption = orchestrator.adopt(row.id)
        job = self.book.new_job(
            _job_id(adoption.spec.name, adoption.backend_id),
            adoption.spec,
            orchestrator.kind,
            backend_id=adoption.backend_id,
            state=adoption.state,
            created=adoption.created,
            started=adoption.started,
            events=list(adoption.events),
        )
        if self.book.store.get(job.id) is None:
            data = adoption.data
            if data.mlflow_uri is None:
                data = data.merged({"mlflow_uri": self.paths.mlflow_uri_for_jobs})
            self.book.insert(job, data.stored())
        row.job_id, row.adoptable = job.id, False
        self.refresh()
        return self.job(job.id)

    def logs(self, queue_id: str, tail: int = 200) -> QueueLogs:
        """A queue row's log, read-only, only where the cluster lets this user read it."""
        if not 0 <= tail <= MAX_LOG_TAIL:
            raise InvalidRequest(f"tail must be between 0 and {MAX_LOG_TAIL}", field="tail")
        row = self.row(queue_id)
        if not row.logs_readable:
            raise Forbidden(
                f"the logs of job {row.id} are not readable for {self.book.user}: "
                f"{row.logs_reason or 'the cluster does not allow it'}",
                field="id",
            )
        data = self.connection.orchestrator.queue_log(row, tail)
        text = data.decode("utf-8", "replace")
        return QueueLogs(id=row.id, text=text, truncated=text.count("\n") >= tail)

    def annotate_pending(self) -> None:
        """Write the explanation into my pending jobs' reasons (what the job list shows)."""
        rows, _ = self.book.query([JobState.PENDING])
        if not rows:
            return
        try:
            explained = self.explain_pending([job for job, _, _ in rows])
        except HyperPodError as error:
            log.debug("queue position not known: %s", error.message)
            return
        except NotImplementedError:
            return
        for job, _, _ in rows:
            text = explained.get(job.id)
            if text and text != job.state_reason:
                self.book.store.update(job.id, state_reason=text)

    def explain_pending(self, jobs: list[Job]) -> dict[str, str]:
        """For my pending jobs: job id -> where it is in the queue and what holds the resources."""
        pending = {job.backend_id: job for job in jobs if job.state is JobState.PENDING}
        if not pending:
            return {}
        snapshot = self.snapshot(max_age=5.0)
        return {
            pending[row.id].id: row.explanation
            for row in snapshot.jobs
            if row.id in pending and row.explanation
        }


def adopt_request(body: Any) -> str:
    """The queue id of a `POST queue/adopt` body ({"id": ...}), checked."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    try:
        return AdoptRequest.model_validate(body).id
    except ValidationError as error:
        raise validation_error(error) from None


def _job_id(name: str, backend_id: str) -> str:
    """A job id for an adopted job: its name and the cluster's id (stable: adopting twice finds it)."""
    import hashlib
    import re

    tail = re.sub(r"[^a-z0-9]+", "-", backend_id.lower()).strip("-")
    if len(tail) > 12:
        tail = hashlib.sha1(backend_id.encode()).hexdigest()[:8]
    return f"{name[: 62 - len(tail) - 1].rstrip('-')}-{tail}"
