"""Acting on a stored job after its start: cancel it (the user's, a chain's, the watchdog's),
forget it, add a line to its events."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Protocol

from pydantic import ValidationError

from .api import JobEventRequest
from .connection import Connection
from .errors import validation_error
from .jobbook import JobBook, stored
from .models import ForgottenJob, Job, JobState
from .partition import Partition
from .paths import JOBS_DIR
from .snapshot import Snapshotter

EVENTS_KEPT = 50
"""The events `add_event` keeps on a job (the newest)."""


class Holds(Protocol):
    """What holds jobs before they start (`chain_service.ChainService`)."""

    def cancel_held(self, job: Job) -> Job | None: ...


class JobControl:
    """`nudge`: tell the tracker now (the feed's listeners hear the new state); `forgotten`:
    told a job's id once its record is gone (the progress cache drops it)."""

    def __init__(
        self,
        connection: Connection,
        book: JobBook,
        partition: Partition,
        snapshots: Snapshotter,
        holds: Holds,
        *,
        nudge: Callable[[], None],
        forgotten: Callable[[str], None],
    ) -> None:
        self.connection = connection
        self.book = book
        self.partition = partition
        self.snapshots = snapshots
        self.holds = holds
        self.nudge = nudge
        self.forgotten = forgotten

    def cancel(self, job_id: str) -> Job:
        job, data = self.book.get(job_id)
        if job.state.finished:
            return job
        held = self.holds.cancel_held(job)  # never started: cancelled in the store only
        if held is not None:
            self.nudge()
            return held
        if not self.book.placed(job, data):  # being handed to the backend: cancelled there
            job, data = self.book.get_placed(job_id)
            if job.state.finished:
                return job
        update = self.connection.orchestrator.cancel(stored(job, data))
        if update.state is None or not update.state.finished:
            update.state = JobState.CANCELLED
        saved = self.book.save(job, data, update)
        self.nudge()  # the feed's listeners hear it now, as after a submit
        return saved

    def cancel_with(self, job_id: str, reason: str, *, event: str) -> Job:
        """Cancel a started job on the cluster with our reason, `event` in its history (a
        chain's failed link: 'cancelled: ...'; the watchdog's evidence: 'watchdog: ...')."""
        job, data = self.book.get(job_id)
        if job.state.finished:
            return job
        update = self.connection.orchestrator.cancel(stored(job, data))
        update.state = JobState.CANCELLED
        update.state_reason = reason
        update.events = [*(update.events or job.events), event]
        return self.book.save(job, data, update)

    def watchdog_cancel(self, job_id: str, evidence: str) -> None:
        """The watchdog's auto-cancel: cancelled, with its evidence in the job's history."""
        self.cancel_with(job_id, evidence, event=f"watchdog: {evidence}")

    def forget(self, job_id: str, *, delete_files: bool = False) -> ForgottenJob:
        """Remove a job from the history (cancelled first if it still runs); its directory
        (`.hyperpod/jobs/<id>`: logs, launch files) is deleted only when asked. The outputs it
        wrote elsewhere in the partition are never touched."""
        job, _ = self.book.get(job_id)
        cancelled = False
        if not job.state.finished:
            self.cancel(job_id)
            cancelled = True
        relative = f"{JOBS_DIR}/{job_id}"
        deleted = False
        if delete_files:
            path = self.partition.resolve(relative, field="delete_files")
            if path.is_dir():
                shutil.rmtree(path)
                deleted = True
            self.snapshots.remove(job_id)  # and the objects no other job's snapshot names
        self.book.store.delete(job_id)
        self.forgotten(job_id)
        return ForgottenJob(id=job_id, cancelled=cancelled, files_deleted=deleted, job_dir=relative)

    def add_event(self, job_id: str, event: str) -> Job:
        """Add one line to the job's events (kept with the backend's, the last EVENTS_KEPT)."""
        try:
            line = JobEventRequest(event=event).event
        except ValidationError as error:
            raise validation_error(error) from None
        job, _ = self.book.get(job_id, connected=False)
        events = [*job.events, line][-EVENTS_KEPT:]
        self.book.store.update(job_id, events=events)
        return job.model_copy(update={"events": events})
