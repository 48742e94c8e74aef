"""The job feed: what the tracker saw change, as numbered events a client follows (#25 item 1).

After each tracker refresh (`Tracker.add_listener`) the feed reads the user's unfinished jobs
(`read`, scoped like `GET jobs`: the server's identity decides which are "mine"), compares each
with what it last published, and publishes:

- `job`: a job whose state, progress, ranks, watchdog facts (stall, stragglers) or anything else
  of its record changed, with the whole `Job`;
- `removed`: a job that left the unfinished list and can no longer be read (forgotten);
- `queue`: the counts of pending and running jobs, when they change.

Each event has a `seq`, one more than the last, kept in a bounded ring (`capacity`). A client
that reconnects with `since=<seq>` gets the events after it; when the ring no longer holds them
(or `seq` is from another server process) it gets one `resync` event: refetch `GET jobs`.
Nothing is read while nobody listens; the first refresh after someone subscribes publishes the
difference since the last read.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import BaseModel, Field, RootModel

from .errors import NotFound
from .models import Job, JobList, JobState

log = logging.getLogger(__name__)

CAPACITY = 2048
"""Events kept for clients that reconnect (a refresh of 20 running jobs publishes at most 21)."""


class FeedJob(BaseModel):
    """A job changed (state, progress, ranks, watchdog facts...): its whole record."""

    type: Literal["job"] = "job"
    seq: int
    time: float = Field(description="When the server published it (Unix time)")
    id: str
    job: Job


class FeedRemoved(BaseModel):
    """A job is gone (forgotten): drop it."""

    type: Literal["removed"] = "removed"
    seq: int
    time: float
    id: str


class FeedQueue(BaseModel):
    """The user's unfinished jobs, counted by state (PENDING, RUNNING)."""

    type: Literal["queue"] = "queue"
    seq: int
    time: float
    counts: dict[str, int]


class FeedHello(BaseModel):
    """The first frame: the feed's numbering (`epoch`) and its last `seq`."""

    type: Literal["hello"] = "hello"
    seq: int
    time: float
    epoch: str


class FeedResync(BaseModel):
    """The events after the client's `since` are no longer held: refetch `GET jobs`."""

    type: Literal["resync"] = "resync"
    seq: int
    time: float
    epoch: str
    reason: str


class FeedHeartbeat(BaseModel):
    """Nothing happened for heartbeat_interval seconds."""

    type: Literal["heartbeat"] = "heartbeat"
    seq: int
    time: float


class FeedEvent(
    RootModel[
        Annotated[
            FeedHello | FeedJob | FeedRemoved | FeedQueue | FeedResync | FeedHeartbeat,
            Field(discriminator="type"),
        ]
    ]
):
    """A frame of `GET feed` (WebSocket text, JSON)."""


Published = tuple[int, str]
"""(seq, the event's JSON): encoded once, sent to every client as is."""


class JobFeed:
    """Publishes job changes with sequence numbers; `read()` lists the unfinished jobs, `get(id)`
    reads one (raises NotFound when it is gone)."""

    def __init__(
        self,
        read: Callable[[], JobList],
        get: Callable[[str], Job],
        *,
        capacity: int = CAPACITY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._read = read
        self._get = get
        self._clock = clock
        self._lock = threading.Lock()
        self._ring: deque[Published] = deque(maxlen=max(1, capacity))
        self._seq = 0
        self._known: dict[str, str] = {}
        """Job id -> the JSON last published for it (unfinished, or finished in the last read)."""
        self._counts: dict[str, int] | None = None
        self._subscribers: list[Callable[[], None]] = []
        self.epoch = f"{int(clock() * 1000):x}"
        """Names this process's numbering: a `since` from another process gets a resync."""

    # -- publishing (the tracker's thread) ------------------------------------------------
    @property
    def seq(self) -> int:
        return self._seq

    def on_refresh(self) -> None:
        """A tracker listener: publish what changed since the last read (nobody listening:
        nothing read)."""
        if not self._subscribers:
            return
        try:
            listed = self._read()
        except Exception:
            log.exception("job feed: reading the jobs failed")
            return
        self.observe(listed.jobs)

    def observe(self, unfinished: list[Job]) -> int:
        """Compare the unfinished jobs with what was published; publish the differences.
        Returns how many events that made."""
        with self._lock:
            return self._observe(unfinished)

    def _observe(self, unfinished: list[Job]) -> int:
        before = self._seq
        seen = {job.id for job in unfinished}
        for job in unfinished:
            self._changed(job)
        for job_id in [i for i in self._known if i not in seen]:
            try:
                job = self._get(job_id)  # it finished (or was forgotten) since the last read
            except NotFound:
                del self._known[job_id]
                self._append(FeedRemoved(seq=self._next(), time=self._clock(), id=job_id))
                continue
            self._changed(job)
            if job.state.finished:
                del self._known[job_id]  # published once, finished: not looked at again
        counts = {
            state.value: sum(1 for job in unfinished if job.state == state)
            for state in (JobState.PENDING, JobState.RUNNING)
        }
        if counts != self._counts:
            self._counts = counts
            self._append(FeedQueue(seq=self._next(), time=self._clock(), counts=counts))
        made = self._seq - before
        if made:
            for wake in list(self._subscribers):
                wake()
        return made

    def _changed(self, job: Job) -> None:
        text = job.model_dump_json()
        if self._known.get(job.id) == text:
            return
        self._known[job.id] = text
        self._append(FeedJob(seq=self._next(), time=self._clock(), id=job.id, job=job))

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _append(self, event: BaseModel) -> None:
        self._ring.append((self._seq, event.model_dump_json()))

    # -- following (the server's loop) ----------------------------------------------------
    def subscribe(self, wake: Callable[[], None]) -> Callable[[], None]:
        """`wake()` is called (in the publishing thread) after new events; returns the
        function that unsubscribes."""
        self._subscribers.append(wake)

        def unsubscribe() -> None:
            if wake in self._subscribers:
                self._subscribers.remove(wake)

        return unsubscribe

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def since(self, seq: int, epoch: str | None = None) -> list[Published]:
        """The events after `seq`; one `resync` event when they are no longer all held (or
        `epoch` names another process's numbering)."""
        with self._lock:
            if (epoch is not None and epoch != self.epoch) or seq > self._seq:
                return [self._resync("the server restarted since that sequence number")]
            if seq == self._seq:
                return []
            oldest = self._ring[0][0] if self._ring else self._seq + 1
            if seq < oldest - 1:
                return [self._resync(f"events after {seq} are no longer held (oldest {oldest})")]
            return [item for item in self._ring if item[0] > seq]

    def hello(self) -> Published:
        """The first frame of a connection: where the numbering stands."""
        with self._lock:
            hello = FeedHello(seq=self._seq, time=self._clock(), epoch=self.epoch)
        return hello.seq, hello.model_dump_json()

    def heartbeat(self, seq: int) -> str:
        return FeedHeartbeat(seq=seq, time=self._clock()).model_dump_json()

    def _resync(self, reason: str) -> Published:
        event = FeedResync(seq=self._seq, time=self._clock(), epoch=self.epoch, reason=reason)
        return self._seq, event.model_dump_json()
