"""Submitting a spec, in two phases: `prepare` stores the job (validated, snapshotted, checked by
the one render of its launch) as PENDING, all or nothing; `start` hands it to the backend. A
job held by its gates (a chain's `after`, a sweep's slots: `core/holds.py`) is prepared now and
started later, from its stored spec and snapshot (`start_stored`)."""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from .backend import JobUpdate, Launch
from .connection import Connection
from .errors import HyperPodError, InvalidRequest, NotFound
from .jobbook import JobBook
from .models import Job, JobSnapshot, JobSpec, JobState
from .partition import Partition
from .paths import JOBS_DIR, ClusterPaths
from .snapshot import Snapshotter, run_from_snapshot

log = logging.getLogger(__name__)


class Verdict(Protocol):
    """A gate's decision on a new job (`holds.Verdict`)."""

    @property
    def kind(self) -> str: ...
    @property
    def reason(self) -> str: ...


class Gates(Protocol):
    """What may hold a job before it starts (`chain_service.ChainService`)."""

    def check(self, spec: JobSpec) -> None: ...
    def dependency(self, spec: JobSpec) -> tuple[tuple[str, ...], bool]: ...
    def verdict(self, job: Job) -> Verdict: ...


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A stored PENDING job (its snapshot taken) and the launch that starts it."""

    job: Job
    data: dict[str, Any]
    launch: Launch


class Submission:
    """`nudge`: tell the tracker now (the feed's listeners hear the new job); `python`: the
    interpreter the snapshot records the packages of (the jobs' one)."""

    def __init__(
        self,
        connection: Connection,
        paths: ClusterPaths,
        partition: Partition,
        book: JobBook,
        snapshots: Snapshotter,
        gates: Gates,
        *,
        nudge: Callable[[], None],
        python: Callable[[], str],
    ) -> None:
        self.connection = connection
        self.paths = paths
        self.partition = partition
        self.book = book
        self.snapshots = snapshots
        self.gates = gates
        self.nudge = nudge
        self.python = python

    @staticmethod
    def new_job_id(spec: JobSpec) -> str:
        return f"{spec.name}-{secrets.token_hex(3)}"

    def launch(self, spec: JobSpec, job_id: str) -> Launch:
        """What the backend is given: the spec with cluster paths and the job's environment."""
        paths = self.paths
        if not spec.workdir and not self.partition.root.exists():
            workdir = self.partition.root  # a preview before the first submit makes it
        else:
            try:
                workdir = self.partition.directory(spec.workdir, field="workdir")
            except NotFound as error:
                raise InvalidRequest(error.message, field="workdir") from None
        job_dir = paths.job_dir(job_id)
        env = {key: paths.translate_text(value) for key, value in spec.env.items()}
        env.setdefault("MLFLOW_TRACKING_URI", paths.mlflow_uri_for_jobs)
        env.update(
            HYPERPOD_JOB_ID=job_id,
            HYPERPOD_JOB_NAME=spec.name,
            HYPERPOD_JOB_DIR=paths.to_cluster(job_dir),
            HYPERPOD_PARTITION=paths.to_cluster(self.partition.root),
        )
        after_ids, after_any = self.gates.dependency(spec)
        return Launch(
            job_id=job_id,
            spec=spec,
            user=self.book.user,
            command=[paths.translate_text(part) for part in spec.command],
            workdir=paths.to_cluster(workdir),
            job_dir=paths.to_cluster(job_dir),
            job_dir_local=job_dir,
            env=env,
            after_ids=after_ids,
            after_any=after_any,
        )

    def submit(self, spec: JobSpec, *, rerun_of: str | None = None) -> Job:
        """Prepare and start; a job its gates hold is stored PENDING with its reason."""
        prepared = self.prepare(spec, rerun_of=rerun_of)
        if prepared.job.held is not None:
            self.nudge()
            return prepared.job
        return self.start(prepared)

    def prepare(self, spec: JobSpec, *, rerun_of: str | None = None) -> Prepared:
        """Store the job PENDING, snapshotted, with its launch checked by one render: all or
        nothing (a spec the backend would refuse leaves no record and no snapshot). `rerun_of`:
        run from that job's snapshot (exactly what it ran) instead of the workdir as it is."""
        self.gates.check(spec)  # what it waits for (#24 chains): refused before anything exists
        self.partition.ensure()  # the first submit of a standalone core makes the partition
        job_id = self.new_job_id(spec)
        launch = self.launch(spec, job_id)
        # The job runs from its snapshot (refused over the admin's limit, creating nothing).
        if rerun_of:
            snapshot = self.snapshots.clone(rerun_of, job_id)
        else:
            snapshot = self.snapshots.take(
                job_id,
                self.partition.directory(spec.workdir, field="workdir"),
                spec=spec.model_dump(mode="json"),
                command=spec.command,
                env=spec.env,
                python=self.python(),
            )
        launch = self.from_snapshot(launch, snapshot)
        orchestrator = self.connection.orchestrator
        # What the backend would refuse is refused before anything is stored or started
        # (render runs the same checks); the backend is handed this render (no second one).
        try:
            launch = dataclasses.replace(launch, rendered=orchestrator.render(launch))
            job = self.book.new_job(job_id, spec, orchestrator.kind, snapshot=snapshot)
            verdict = self.gates.verdict(job)  # held until its gates let it start (#24)
        except BaseException:
            self.snapshots.remove(job_id)
            raise
        if verdict.kind == "waiting":
            job.held = job.state_reason = verdict.reason
        data = {"mlflow_uri": launch.env["MLFLOW_TRACKING_URI"]}
        try:
            self.book.insert(job, data)
        except (UnicodeError, ValueError) as error:
            self.snapshots.remove(job_id)
            raise InvalidRequest(f"the job cannot be stored: {error}") from None
        return Prepared(job, data, launch)

    def start(self, prepared: Prepared) -> Job:
        """Hand a prepared job to the backend. A start the backend refuses (a typed error:
        nothing started) leaves no record and no snapshot; any other failure is recorded as
        FAILED with its reason, which also frees its slot."""
        return self._submit(prepared.job, prepared.data, prepared.launch)

    def start_stored(self, job_id: str) -> Job:
        """Start a stored job that was held (its hold claimed): its launch built again from
        its spec and snapshot (no new snapshot), then handed to the backend as a submit would;
        a refusal leaves it FAILED with the reason."""
        job, data = self.book.get(job_id)
        launch = self.launch(job.spec, job_id)
        if job.snapshot is not None:
            launch = self.from_snapshot(launch, job.snapshot)
        job = job.model_copy(update={"held": None, "state_reason": None})
        self.book.store.update(job_id, state_reason=None)
        try:
            return self._submit(job, data, launch, keep_record=True)
        except HyperPodError as error:
            reason = f"the job could not be started: {error.message}"
            update = JobUpdate(state=JobState.FAILED, state_reason=reason, ended=time.time())
            return self.book.save(job, data, update)

    def from_snapshot(self, launch: Launch, snapshot: JobSnapshot) -> Launch:
        """The launch run from the snapshot's tree (HYPERPOD_WORKDIR: where it was taken)."""
        tree: Path = self.partition.root / snapshot.tree
        shown = self.paths.to_cluster(tree)
        return dataclasses.replace(
            launch,
            command=run_from_snapshot(launch.command, tree, shown),
            env={**launch.env, "HYPERPOD_SNAPSHOT": shown, "HYPERPOD_WORKDIR": launch.workdir},
        )

    def _submit(
        self, job: Job, data: dict[str, Any], launch: Launch, *, keep_record: bool = False
    ) -> Job:
        """A typed refusal removes the record and the snapshot (nothing started), unless
        `keep_record` (a held job released later: the caller records it FAILED)."""
        job_id = job.id
        try:
            # Created here, removed again if the backend fails: no half-created job directory,
            # and a read-only or full file system answers 503 with what to do.
            with self.partition.new_directory(launch.job_dir_local, shown=f"{JOBS_DIR}/{job_id}"):
                update = self.connection.orchestrator.submit(launch)
        except HyperPodError:
            if not keep_record:
                self.book.store.delete(job_id)
                self.snapshots.remove(job_id)
            raise
        except Exception as error:
            log.exception("the start of job %s failed", job_id)
            update = JobUpdate(
                state=JobState.FAILED,
                state_reason=f"the job could not be started: {error}",
                ended=time.time(),
            )
        saved = self.book.save(job, data, update)
        self.nudge()  # after the save: the feed's listeners read the record as it now is
        return saved
