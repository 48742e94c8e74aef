"""Reading the user's jobs: their records with what the tracker found (progress, watchdog,
staleness), their logs (a tail, or followed), their MLflow metrics and their stack dumps. A read
never asks the backend for a state: the tracker's refresh does."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .api import LogEvent, RankArg
from .backend import LogReader
from .connection import Connection
from .errors import InvalidRequest, NotFound
from .jobbook import JobBook, stored
from .logprotocol import Follow, follow_events, settle
from .models import Job, JobList, JobMetrics, JobState, LogSnapshot, RankStack, StackDump
from .partition import Partition
from .paths import JOBS_DIR, ClusterPaths
from .stacks import mark_differences
from .state import BackendState
from .tracking import JobTracking

MAX_TAIL_LINES = 100_000
STACKS_FILE = "stacks.json"

JobMetricsOf = Callable[[str | None, str], JobMetrics]
"""The metrics of a job's MLflow run: (tracking URI, the tag's job id)."""


class JobReads:
    """`job_metrics`: the MLflow adapter; `heartbeat`: seconds between a follow's heartbeats."""

    def __init__(
        self,
        connection: Connection,
        book: JobBook,
        tracking: JobTracking,
        partition: Partition,
        paths: ClusterPaths,
        job_metrics: JobMetricsOf,
        *,
        heartbeat: Callable[[], float],
    ) -> None:
        self.connection = connection
        self.book = book
        self.tracking = tracking
        self.partition = partition
        self.paths = paths
        self.job_metrics = job_metrics
        self.heartbeat = heartbeat

    def jobs(
        self, *, states: Sequence[JobState] | None = None, limit: int = 100, offset: int = 0
    ) -> JobList:
        if not 1 <= limit <= 1000:
            raise InvalidRequest("limit must be between 1 and 1000", field="limit")
        if offset < 0:
            raise InvalidRequest("offset cannot be negative", field="offset")
        tracking = self.tracking
        tracking.look()
        rows, total = self.book.query(states, limit=limit, offset=offset)
        shown = [tracking.mark_stale(tracking.with_progress(job, data)) for job, _, data in rows]
        return tracking.mark_stale(JobList(jobs=shown, total=total))

    def job(self, job_id: str) -> Job:
        job, data = self.book.get(job_id, connected=False)
        found = self.book.record(job_id)
        elsewhere = self.book.elsewhere(job, found[1]) if found else None
        if elsewhere:
            # Its record, as last seen: no refresh reaches a cluster we are not connected to.
            if job.state.finished:
                return job
            return job.model_copy(update={"stale_reason": elsewhere, "stale_since": job.started})
        if not job.state.finished:
            self.tracking.look()
            job, data = self.book.get(job_id)
        return self.tracking.mark_stale(self.tracking.with_progress(job, data))

    # -- logs --------------------------------------------------------------------------------
    def log_reader(self, job_id: str, rank: int = 0) -> LogReader:
        job, data = self.book.get(job_id)
        if not 0 <= rank < job.spec.world_size:
            raise InvalidRequest(
                f"rank must be between 0 and {job.spec.world_size - 1}", field="rank"
            )
        return self.tracking.log_reader(job, data, rank)

    def logs(self, job_id: str, *, rank: int = 0, tail: int = 200) -> LogSnapshot:
        if not 0 <= tail <= MAX_TAIL_LINES:
            raise InvalidRequest(f"tail must be between 0 and {MAX_TAIL_LINES}", field="tail")
        reader = self.log_reader(job_id, rank)
        try:
            if self.book.get(job_id)[0].state.finished:
                settle(reader)  # the whole log of a finished job, as the follow loop sends it
            data, start, end = reader.tail(tail)
        finally:
            reader.close()
        return LogSnapshot(
            rank=rank,
            text=data.decode("utf-8", "replace"),
            start_offset=start,
            offset=end,
            truncated=start > 0,
        )

    def follow(
        self,
        job_id: str,
        *,
        rank: RankArg = 0,
        offset: int = 0,
        offsets: Mapping[int, int] | None = None,
    ) -> Iterator[LogEvent]:
        """The log stream's events, read from the backend in this process (same protocol)."""
        job = self.job(job_id)
        ranks = list(range(job.spec.world_size)) if rank == "all" else [int(rank)]
        given = dict(offsets or {})
        if rank != "all":
            given.setdefault(int(rank), offset)
        positions = {r: int(given.get(r, 0)) for r in ranks}
        return follow_events(Follow(self, job_id, positions, heartbeat_every=self.heartbeat()))

    # -- metrics -----------------------------------------------------------------------------
    def metrics(self, job_id: str) -> JobMetrics:
        job, data = self.book.get(job_id)
        facts = BackendState.load(data)
        uri = self.paths.mlflow_uri_for_server(facts.mlflow_uri)
        found = self.job_metrics(uri, job.id)
        if found.run is None and facts.adopted and job.backend_id:
            # A job submitted elsewhere tags its run with the cluster's id, if with anything.
            by_backend = self.job_metrics(uri, job.backend_id)
            if by_backend.run is not None:
                return by_backend
        return found

    # -- stacks ------------------------------------------------------------------------------
    def dump_stacks(self, job_id: str) -> StackDump:
        """py-spy dump of every rank of a running job, frames that differ marked; stored in
        the job's directory (the last dump: `stacks`)."""
        job, data = self.book.get(job_id)
        if job.state != JobState.RUNNING:
            raise InvalidRequest(
                f"job '{job_id}' is {job.state.value}: only a running job has stacks", field="id"
            )
        orchestrator = self.connection.orchestrator
        # A backend dumps every rank at once (Slurm: one srun) or one rank at a time (local).
        dump_all = getattr(orchestrator, "dump_stacks", None)
        dump_stack = getattr(orchestrator, "dump_stack", None)
        if dump_all is None and dump_stack is None:
            raise InvalidRequest(
                f"the {orchestrator.kind} backend cannot dump stacks yet", field="id"
            )
        nodes = {info.rank: info.node for info in job.ranks}
        every: dict[int, Any] = dump_all(stored(job, data)) if dump_all is not None else {}
        ranks = []
        for rank in range(job.spec.world_size):
            if dump_all is not None:
                found = every.get(rank) or RankStack(
                    rank=rank, error="no process of this rank was found on its node"
                )
            elif dump_stack is not None:
                found = dump_stack(stored(job, data), rank)
            else:  # unreachable: one of the two exists
                continue
            if not found.node:
                found = found.model_copy(update={"node": nodes.get(rank)})
            ranks.append(found)
        dump = StackDump(job_id=job.id, taken_at=time.time(), ranks=mark_differences(ranks))
        path = self.partition.resolve(f"{JOBS_DIR}/{job_id}/{STACKS_FILE}", field="id")
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(dump.model_dump_json(), encoding="utf-8")
        os.replace(temporary, path)
        return dump

    def stacks(self, job_id: str) -> StackDump:
        """The job's last stack dump, as stored with it."""
        self.book.get(job_id, connected=False)
        path = self.partition.resolve(f"{JOBS_DIR}/{job_id}/{STACKS_FILE}", field="id")
        if not path.is_file():
            raise NotFound(f"no stacks of job '{job_id}' yet: dump them first", field="id")
        return StackDump.model_validate_json(path.read_text(encoding="utf-8"))
