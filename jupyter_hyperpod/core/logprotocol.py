"""The log-follow protocol: its frames, its close codes and the one follow loop.

Every way of following a job's log uses this module: the WebSocket handler (`handlers.py`, frames
as JSON text, with `frames=binary` the data frames as binary messages, then a close code), the
in-process follow of the CLI and the magics (the same frames as `LogEvent`s) and the REST client
(`client.py`, which reads the frames and the close codes back). The panel (`src/logframes.ts`, read by `src/logstream.ts`)
keeps a copy of the close-code table and of the binary header; `docs/log-protocol.json` is
the table as data (`python -m jupyter_hyperpod.core.logprotocol > docs/log-protocol.json`) and the
tests of both clients check their copies against it.

Frames, in order: `status` (the job's state, first and on every change), `data` (text of one
rank, with the byte offset just after it: a client resumes from there and loses and repeats
nothing), `heartbeat` (every `heartbeat_interval` while nothing else is sent), then either `end`
(the job finished and every byte was sent; close 1000) or `error` (why the stream stops; the close
code says whether to retry).

The follow loop is a small state machine (`Follow.step`) with blocking reads: the WebSocket
handler runs each step in a worker thread, the in-process follow calls it directly. The frames and
close codes themselves are `core/logframes.py` (re-exported here, where every client imports them).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from .errors import InvalidRequest
from .logframes import (
    BINARY_DATA,
    BINARY_HEADER,
    BY_CODE,
    CLOSE,
    CLOSE_CODES,
    CLOSE_JOB_ENDED,
    FRAME_ENCODINGS,
    FRAME_TYPES,
    FRAMES_QUERY,
    CloseCode,
    FrameEncoding,
    FrameType,
    LogEvent,
    close_for,
    json_string,
    table,
)
from .models import JobState

__all__ = [
    "BINARY_DATA",
    "BINARY_HEADER",
    "BY_CODE",
    "CLOSE",
    "CLOSE_CODES",
    "CLOSE_JOB_ENDED",
    "FRAMES_QUERY",
    "FRAME_ENCODINGS",
    "FRAME_TYPES",
    "CloseCode",
    "Follow",
    "FrameEncoding",
    "FrameType",
    "JobLooks",
    "LogEvent",
    "RankArg",
    "Step",
    "close_for",
    "complete_utf8",
    "follow_async",
    "follow_events",
    "json_string",
    "parse_frames",
    "parse_offset",
    "parse_offsets",
    "settle",
    "table",
]

T = TypeVar("T")

CHUNK_BYTES = 1024 * 1024
"""At most this much of one rank per frame (one read; the next step reads on)."""
IDLE_WAIT_START = 0.01
IDLE_WAIT_MAX = 0.1
"""Backoff between reads while nothing new arrives (reset by new data)."""
STEPS_PER_SECOND = 4000
"""The reads every follower of this process makes together while logs grow: past
STEPS_PER_SECOND * IDLE_WAIT_START followers each waits longer after new data (200 followers:
50 ms), so that 200 followers of a busy log cost a bounded share of the server, not 200 times
one follower's polling."""
_ACTIVE = [0]
_ACTIVE_LOCK = threading.Lock()


def _after_data() -> float:
    """The wait after a read that brought data."""
    return max(IDLE_WAIT_START, _ACTIVE[0] / STEPS_PER_SECOND)


STATE_CHECK_SECONDS = 0.25
"""How often the job's state is looked at (from the store: never a backend call)."""
MAX_OFFSET = 2**53 - 1
"""The largest offset a client may resume from (what a JavaScript number holds exactly)."""

RankArg = int | Literal["all"]


# -- requests -------------------------------------------------------------------------------


def parse_offset(text: str, field: str = "offset") -> int:
    try:
        value = int(text or 0)
    except ValueError:
        raise InvalidRequest(f"{field} must be a whole number, not '{text}'", field=field) from None
    if not 0 <= value <= MAX_OFFSET:
        raise InvalidRequest(f"{field} must be between 0 and {MAX_OFFSET}", field=field)
    return value


def parse_frames(text: str) -> FrameEncoding:
    """`frames=text` (the default) or `frames=binary` (data frames as binary messages)."""
    if text in ("", "text"):
        return "text"
    if text == "binary":
        return "binary"
    raise InvalidRequest(
        f"{FRAMES_QUERY} must be one of {', '.join(FRAME_ENCODINGS)}, not '{text}'",
        field=FRAMES_QUERY,
    )


def parse_offsets(text: str, ranks: list[int]) -> dict[int, int]:
    """`0:123,1:456` -> {0: 123, 1: 456}; ranks not named start at 0."""
    offsets = dict.fromkeys(ranks, 0)
    for item in filter(None, text.split(",")):
        rank, sep, offset = item.partition(":")
        try:
            rank_number = int(rank)
            offset_number = int(offset)
        except ValueError:
            raise InvalidRequest("offsets must look like 0:123,1:456", field="offsets") from None
        if not sep or rank_number not in offsets or offset_number < 0:
            raise InvalidRequest(f"offset '{item}' names no rank of this job", field="offsets")
        if offset_number > MAX_OFFSET:
            raise InvalidRequest(f"offsets must be at most {MAX_OFFSET}", field="offsets")
        offsets[rank_number] = offset_number
    return offsets


def settle(reader: object) -> None:
    """A finished job's log is read to its end before its last read: a reader that spools a
    remote stream (Kubernetes) may still be catching up, after an outage say. Every final read
    (the follow loop's and a snapshot's) goes through here."""
    wait_complete = getattr(reader, "wait_complete", None)
    if wait_complete is not None:
        wait_complete()


def complete_utf8(data: bytes) -> int:
    """Length of the longest prefix of data that does not end inside a UTF-8 character."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xC0:  # a lead byte: how long is its character?
            needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= needed else len(data) - back
    return len(data)


# -- the follow loop ------------------------------------------------------------------------


class Reader(Protocol):
    """What the loop needs of a rank's log (`core.backend.LogReader`)."""

    def read(self, offset: int, max_bytes: int) -> bytes: ...
    def close(self) -> None: ...


class JobView(Protocol):
    """What the loop needs of a job (`core.models.Job`)."""

    @property
    def state(self) -> JobState: ...
    @property
    def state_reason(self) -> str | None: ...
    @property
    def exit_code(self) -> int | None: ...


class Source(Protocol):
    """Where a follow gets the job's state and its rank logs (`HyperPodService`)."""

    def job(self, job_id: str) -> Any: ...
    def log_reader(self, job_id: str, rank: int = 0) -> Any: ...


@dataclass
class Step:
    events: list[LogEvent] = field(default_factory=list)
    done: bool = False
    wait: float = 0.0
    """Seconds to wait before the next step (0: step again at once)."""


class JobLooks:
    """A job's state as its followers look at it: one store read per job every `fresh_for`,
    shared by every follower of the job (200 followers of one job read the store 8 times a
    second, not 800). Each follower's first look, which checks that it may follow the job, is
    its own (`Follow.for_request`)."""

    def __init__(
        self,
        source: Source,
        fresh_for: float = STATE_CHECK_SECONDS / 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.fresh_for = fresh_for
        self.clock = clock
        self._seen: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def job(self, job_id: str) -> Any:
        now = self.clock()
        with self._lock:
            seen = self._seen.get(job_id)
        if seen is not None and now - seen[0] < self.fresh_for:
            return seen[1]
        job = self.source.job(job_id)  # outside the lock: a slow read holds up no other job
        with self._lock:
            if len(self._seen) > 1024:  # jobs no longer followed
                self._seen = {
                    key: value for key, value in self._seen.items() if now - value[0] < 1.0
                }
            self._seen[job_id] = (now, job)
        return job


class Follow:
    """One follower of one job's ranks: the state machine every follow runs.

    `open` gets the readers, `step` (blocking: file or spool reads) says what to send and how
    long to wait, `close` releases every reader. The three are serialised and `close` is final,
    so a step still running in a worker thread when the client goes away never reopens a file."""

    def __init__(
        self,
        source: Source,
        job_id: str,
        offsets: dict[int, int],
        *,
        heartbeat_every: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
        looks: JobLooks | None = None,
    ) -> None:
        self.source = source
        self.looks = looks or JobLooks(source, fresh_for=0.0, clock=clock)
        """Where the state checks after the first look go (shared by the server's followers)."""
        self.job_id = job_id
        self.offsets = dict(offsets)
        self.heartbeat_every = heartbeat_every
        self.clock = clock
        self.readers: dict[int, Reader] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._job: JobView | None = None
        self._state: JobState | None = None
        self._checked = 0.0
        self._beat = clock()
        self._idle = IDLE_WAIT_START
        self._counted = False

    @classmethod
    def for_request(
        cls,
        source: Source,
        job_id: str,
        rank: str,
        *,
        offset: str = "0",
        offsets: str = "",
        heartbeat_every: float = 15.0,
        looks: JobLooks | None = None,
    ) -> Follow:
        """From the stream's query: `rank` a number or `all`; `offset`, or `offsets` with all."""
        job = source.job(job_id)
        if rank == "all":
            positions = parse_offsets(offsets, list(range(job.spec.world_size)))
        else:
            try:
                number = int(rank)
            except ValueError:
                raise InvalidRequest("rank must be a number or 'all'", field="rank") from None
            positions = {number: parse_offset(offset)}
        follow = cls(source, job_id, positions, heartbeat_every=heartbeat_every, looks=looks)
        follow._job = job
        return follow

    @property
    def closed(self) -> bool:
        return self._closed

    def open(self) -> None:
        with self._lock:
            if self._closed:
                return
            if not self._counted:
                self._counted = True
                with _ACTIVE_LOCK:
                    _ACTIVE[0] += 1
            try:
                for rank in self.offsets:
                    if rank not in self.readers:
                        self.readers[rank] = self.source.log_reader(self.job_id, rank)
            except BaseException:
                self._close_readers()
                raise

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._close_readers()
            if self._counted:
                self._counted = False
                with _ACTIVE_LOCK:
                    _ACTIVE[0] -= 1

    def _close_readers(self) -> None:
        readers, self.readers = self.readers, {}
        for reader in readers.values():
            try:
                reader.close()
            except Exception:  # closing must reach every reader
                continue

    def step(self) -> Step:
        with self._lock:
            if self._closed:
                return Step(done=True)
            return self._step()

    def _step(self) -> Step:
        now = self.clock()
        if self._job is None or (
            self._state is not None and now - self._checked >= STATE_CHECK_SECONDS
        ):
            self._job = self.looks.job(self.job_id)
            self._checked = now
        elif self._state is None:
            self._checked = now
        job = self._job
        step = Step()
        state = job.state
        if state != self._state:
            self._state = state
            step.events.append(LogEvent(type="status", state=state, reason=job.state_reason))
        if state is not JobState.PENDING:
            final = state.finished
            if final:
                for reader in self.readers.values():
                    settle(reader)
            for rank, reader in self.readers.items():
                step.events.extend(self._read(rank, reader, final))
        if state.finished:
            step.events.append(LogEvent(type="end", state=state, exit_code=job.exit_code))
            step.done = True
            return step
        sent = any(event.type == "data" for event in step.events)
        if step.events:
            self._beat = now
        elif now - self._beat >= self.heartbeat_every:
            step.events.append(LogEvent(type="heartbeat", time=time.time()))
            self._beat = now
        if sent:
            self._idle = _after_data()
            if self._idle > IDLE_WAIT_START:  # many followers: the next read waits its turn
                step.wait = self._idle
        else:
            step.wait = self._idle
            self._idle = min(IDLE_WAIT_MAX, self._idle * 1.5)
        return step

    def _read(self, rank: int, reader: Reader, final: bool) -> list[LogEvent]:
        """One chunk of a rank (all that is left, by chunks, when the job has finished)."""
        events = []
        while True:
            offset = self.offsets[rank]
            data = reader.read(offset, CHUNK_BYTES)
            usable = len(data) if final else complete_utf8(data)
            if not usable:
                break
            self.offsets[rank] = offset + usable
            chunk = data[:usable]
            raw: bytes | None = chunk
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError:  # sent as decoded, invalid bytes replaced
                text, raw = chunk.decode("utf-8", "replace"), None
            events.append(
                LogEvent(type="data", rank=rank, offset=offset + usable, data=text, raw=raw)
            )
            if not final or len(data) < CHUNK_BYTES:
                break
        return events


def follow_events(
    follow: Follow, sleep: Callable[[float], None] = time.sleep
) -> Iterator[LogEvent]:
    """The in-process follow: the events until the job ends; closing the iterator stops it."""
    try:
        follow.open()
        while True:
            step = follow.step()
            yield from step.events
            if step.done:
                return
            if step.wait:
                sleep(step.wait)
    finally:
        follow.close()


Runner = Callable[[Callable[[], T]], Awaitable[T]]


async def follow_async(follow: Follow, run: Runner[Any]) -> AsyncGenerator[LogEvent, None]:
    """The same loop for an event loop: each step runs through `run` (a worker thread).

    Use it with `contextlib.aclosing`: whatever ends it (the job, an error, a client gone, a
    cancelled task), every reader is released."""
    try:
        await run(follow.open)
        while True:
            step: Step = await run(follow.step)
            for event in step.events:
                yield event
            if step.done:
                return
            if step.wait:
                await asyncio.sleep(step.wait)
    finally:
        await _close_async(follow, run)


async def _close_async(follow: Follow, run: Runner[Any]) -> None:
    try:
        # Shielded: a second cancel does not stop the close, which waits for a running step.
        await asyncio.shield(run(follow.close))
    except RuntimeError:
        # The pool is gone (the server stops): close in a plain thread.
        threading.Thread(target=follow.close, name="hyperpod-follow-close").start()


def main() -> None:
    json.dump(table(), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
