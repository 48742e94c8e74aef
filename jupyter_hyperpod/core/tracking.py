"""Keeping the connected cluster's job states fresh: the tracker's refresh (one batched backend
query for the unfinished jobs, then each running job's progress and step clocks), and what a
reader adds to a stored job from it (progress, watchdog, staleness) without asking the backend."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .adapters import Progress
from .backend import DeferredLogReader, FileLogReader, LogReader
from .connection import Connection
from .jobbook import JobBook, stored
from .jobwatch import JobWatch
from .models import Job, JobList, JobState
from .partition import Partition
from .paths import ClusterPaths
from .settings import HyperPodSettings
from .state import BackendState
from .store import JobStore
from .timed_cache import TimedCache
from .tracker import Tracker

log = logging.getLogger(__name__)

FIRST_REFRESH_WAIT = 2.0
"""How long a read waits, once, for the first status refresh of a process that just started."""
LEASE_SECONDS = 30.0
"""A service that stopped refreshing this long is gone: its queued local jobs may be adopted."""
PROGRESS_MAX_AGE = 2.0
"""Seconds a job's parsed progress is reused (read again by the next status refresh)."""
MLFLOW_PROGRESS_MAX_AGE = 10.0
"""Seconds between MLflow reads for a job whose log tells no progress."""

Marked = TypeVar("Marked", Job, JobList)


class JobTracking:
    """Owns the `tracker` (not started: the service starts it once built) and the `watch`.
    `cancel(job_id, evidence)`: the watchdog's auto-cancel; `after_refresh(jobs)`: told the
    unfinished jobs after each status refresh (the hold engine, the queue's explanations)."""

    def __init__(
        self,
        settings: HyperPodSettings,
        connection: Connection,
        book: JobBook,
        paths: ClusterPaths,
        partition: Partition,
        progress: Progress,
        *,
        owner: str,
        cancel: Callable[[str, str], None],
        after_refresh: Callable[[list[Job]], None],
    ) -> None:
        self.connection = connection
        self.book = book
        self.paths = paths
        self.partition = partition
        self.parser = progress
        self.owner = owner
        self.after_refresh = after_refresh
        self.progress: TimedCache[str, Any] = TimedCache(PROGRESS_MAX_AGE)
        """Each running job's last progress, read by the tracker's refresh."""
        self.mlflow_progress: TimedCache[str, Any] = TimedCache(MLFLOW_PROGRESS_MAX_AGE)
        self.youngest: float | None = None
        self.watch = JobWatch(settings, self.log_reader, cancel)
        """Step clocks, hangs and stragglers of the running jobs (`core/jobwatch.py`)."""
        self.tracker = Tracker(
            self.refresh,
            min_interval=float(settings.refresh_interval),
            max_interval=connection.orchestrator.status_poll_max,
            name=f"hyperpod-tracker-{connection.kind}",
        )

    @property
    def store(self) -> JobStore:
        return self.book.store

    # -- the tracker's thread --------------------------------------------------------------
    def refresh(self) -> float | None:
        """What the tracker runs: returns the age of the youngest unfinished job (or None)."""
        self.store.renew_lease(self.owner, max(LEASE_SECONDS, 3 * self.tracker.max_interval))
        self.refresh_states()
        try:
            self.refresh_progress()
        except Exception:  # progress is a hint: its failure never marks the states stale
            log.exception("the progress refresh failed")
        try:
            self.watch.refresh(
                [(job, data) for job, _, data in self.book.query([JobState.RUNNING])[0]]
            )
        except Exception:  # so is the watchdog
            log.exception("the watchdog refresh failed")
        return self.youngest

    def refresh_states(self) -> None:
        """One batched status query for all unfinished jobs; updates the store."""
        with self.connection.lock:
            rows, _ = self.book.query([JobState.PENDING, JobState.RUNNING])
            left = set()
            for job, _, data in rows:
                if self.book.left_behind(job, data):
                    self.book.fail_left_behind(job, data)
                    left.add(job.id)
            # A held job is not on the cluster yet: the hold engine releases it (#24).
            asked = [
                stored(job, data)
                for job, _, data in rows
                if job.held is None and job.id not in left
            ]
            if asked:
                updates = self.connection.orchestrator.refresh(asked)
                for job, _, data in rows:
                    update = updates.get(job.id)
                    if update is not None:
                        self.book.save(job, data, update)
            newest = max((job.created for job, _, _ in rows), default=None)
            self.youngest = None if newest is None else time.time() - newest
        if rows:
            self.after_refresh([job for job, _, _ in rows])

    def refresh_progress(self) -> None:
        """The progress of every running job whose last reading is older than PROGRESS_MAX_AGE:
        what the cluster reports, else parsed from the last lines of rank 0's log (or read from
        its MLflow run)."""
        rows, _ = self.book.query([JobState.RUNNING])
        self.progress.keep_only(job.id for job, _, _ in rows)
        for job, _, data in rows:
            self.progress.read(job.id, functools.partial(self._read_progress, job, data))

    def _read_progress(self, job: Job, data: dict[str, Any]) -> Any:
        orchestrator = self.connection.orchestrator
        reported = orchestrator.reported_progress(job, data)
        if reported is not None:  # the cluster's own figure (a TrainJob's trainer) wins
            return reported
        parser = self.parser
        try:
            reader = orchestrator.log_reader(stored(job, data), 0)
            try:
                text = reader.tail(parser.tail_lines)[0].decode("utf-8", "replace")
            finally:
                reader.close()
            progress = parser.of_log(text, started=job.started)
        except Exception as error:  # a log not there yet, a backend hiccup: no progress
            log.debug("no progress for %s: %s", job.id, error)
            progress = None
        return progress if progress is not None else self._mlflow_progress(job, data)

    def _mlflow_progress(self, job: Job, data: dict[str, Any]) -> Any:
        """The progress the job's MLflow run tells (last step of its loss, its total steps)."""

        def read() -> Any:
            try:
                uri = self.paths.mlflow_uri_for_server(BackendState.load(data).mlflow_uri)
                return self.parser.from_mlflow(uri, job.id, started=job.started)
            except Exception as error:  # MLflow down or slow: the list still answers
                log.debug("no MLflow progress for %s: %s", job.id, error)
                return None

        return self.mlflow_progress.read(job.id, read)

    def log_reader(self, job: Job, data: dict[str, Any], rank: int) -> LogReader:
        """A rank's log reader; a log file stays inside the partition (no planted symlink)."""
        if not self.book.placed(job, data):  # not on the cluster yet: its log once it is
            return DeferredLogReader(lambda: self._started_log_reader(job.id, rank))
        if job.state.finished and job.started is None and job.backend_id is None:
            return DeferredLogReader(lambda: None)  # ended before it reached the cluster
        reader = self.connection.orchestrator.log_reader(stored(job, data), rank)
        if isinstance(reader, FileLogReader):
            reader.guard = self.partition.guard(reader.path, shown=f"the log of rank {rank}")
        return reader

    def _started_log_reader(self, job_id: str, rank: int) -> LogReader | None:
        """A job's log reader once it is placed on the cluster (None until then)."""
        found = self.book.record(job_id)
        if found is None or not self.book.placed(found[0], found[2]):
            return None
        return self.log_reader(found[0], found[2], rank)

    def forget(self, job_id: str) -> None:
        self.progress.drop(job_id)

    # -- readers ---------------------------------------------------------------------------
    @property
    def reads_wait(self) -> bool:
        """Whether a status read (`jobs`, `job`) may still wait: for the first refresh of a
        process that has just started, or for the cluster's name (asked of the backend once).
        Otherwise a read touches only the store (its own connection: never behind a write) and
        the tracker's caches, so the server answers it at once on its loop instead of handing
        it to a thread (the hop costs more than the read)."""
        return not self.tracker.first_done or self.connection.name is None

    def look(self) -> None:
        """A reader looks at unfinished jobs: refresh soon in the background, never here (but a
        process that has just started waits a moment for its first look at the backend)."""
        self.tracker.nudge()
        self.tracker.wait_first(FIRST_REFRESH_WAIT)

    def mark_stale(self, value: Marked) -> Marked:
        """The tracker's staleness on a job (unfinished) or a job list."""
        stale = self.tracker.stale
        if stale is None or (isinstance(value, Job) and value.state.finished):
            return value
        return value.model_copy(update={"stale_reason": stale.reason, "stale_since": stale.since})

    def with_progress(self, job: Job, data: dict[str, Any]) -> Job:
        """A running job with its last known progress: readers never read a log or MLflow
        (the refresh does), they take what it found. A job the cluster's operator judged (its
        own hang/slow verdict, decided by the backend) shows it."""
        verdict = BackendState.load(data).operator_verdict
        if verdict:
            job = job.model_copy(update={"operator_verdict": verdict})
        if job.state != JobState.RUNNING:
            return job
        progress = self.progress.get(job.id)
        update: dict[str, Any] = {"watchdog": self.watch.of(job.id)}
        if progress:
            update["progress"] = progress
        return job.model_copy(update=update)
