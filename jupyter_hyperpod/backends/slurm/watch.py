"""One thread that keeps the time limits of every running Slurm client command.

A command waited for with `Popen.communicate(timeout=...)` is reaped, once its pipes close, by
polling `waitpid` with sleeps of 0.5 ms doubling up to 50 ms (CPython 3.11's `Popen._wait`); a
`communicate()` without a timeout blocks in `waitpid` and wakes when the child exits. On the test
cluster that poll alone cost a submit 0.45 ms: `sbatch --parsable` median 4.49 ms with a timeout
against 4.04 ms without (60 interleaved rounds). So `SlurmCommands` waits without a timeout and
this thread ends the commands that run too long: at a command's stall time it asks the command's
`on_stall` (probe the controller) whether to stop it, and at its time limit it stops it.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

IDLE_SECONDS = 60.0
"""How long the thread waits with nothing to watch before it ends (the next command starts it)."""


class Watched:
    """One command under watch; `stopped_because` says why the watch killed it, if it did."""

    def __init__(
        self,
        process: subprocess.Popen[Any],
        *,
        limit_at: float,
        limit_message: str,
        on_stall: Callable[[], str | None] | None,
        reap: bool = False,
    ) -> None:
        self._process: subprocess.Popen[Any] | None = process
        self.limit_at = limit_at
        self.limit_message = limit_message
        self.on_stall = on_stall
        self.reap = reap
        """Reap it when stopped (nobody else waits for it: a standby, standby.py)."""
        self.stopped_because: str | None = None
        self._lock = threading.Lock()

    @property
    def finished(self) -> bool:
        return self._process is None

    def finish(self) -> None:
        """The command ended (or its caller gave up on it): never stop it from now on."""
        with self._lock:
            self._process = None

    def stop(self, reason: str) -> None:
        with self._lock:
            process = self._process
            if process is None:
                return
            self.stopped_because = reason
            process.kill()
        if self.reap:
            stop_and_reap(process)


@dataclass(order=True)
class _Due:
    at: float
    order: int
    watched: Watched = field(compare=False)
    stall_check: bool = field(compare=False)


class CommandWatch:
    """Deadlines of running commands in one heap, served by one daemon thread (started on the
    first command, ended after `idle_seconds` with none). A stall check runs on that thread, so a
    probe that waits (an address that drops packets) delays the other commands' checks by at most
    its own timeout."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        idle_seconds: float = IDLE_SECONDS,
        name: str = "hyperpod-slurm-watch",
    ) -> None:
        self._clock = clock
        self._idle_seconds = idle_seconds
        self._name = name
        self._heap: list[_Due] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._wakes_at = math.inf
        self._thread: threading.Thread | None = None

    def watch(
        self,
        process: subprocess.Popen[Any],
        *,
        limit: float,
        limit_message: str,
        stall: float | None = None,
        on_stall: Callable[[], str | None] | None = None,
        reap: bool = False,
    ) -> Watched:
        """Watch `process` from now: stopped after `limit` seconds; after `stall` seconds (when
        given and shorter), `on_stall()` runs and the process is stopped if it returns a reason.
        `reap`: a stopped process is also reaped here (no caller waits for it)."""
        now = self._clock()
        stall_at = (
            now + stall if on_stall is not None and stall is not None and stall < limit else None
        )
        watched = Watched(
            process,
            limit_at=now + limit,
            limit_message=limit_message,
            on_stall=on_stall if stall_at is not None else None,
            reap=reap,
        )
        first_at = stall_at if stall_at is not None else watched.limit_at
        self._push(_Due(first_at, next(self._order), watched, stall_at is not None))
        return watched

    @property
    def pending(self) -> int:
        """Deadlines not yet come (finished commands' included until they come)."""
        with self._changed:
            return len(self._heap)

    def _push(self, due: _Due) -> None:
        with self._changed:
            heapq.heappush(self._heap, due)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif due.at < self._wakes_at:
                self._changed.notify()

    def _next_due(self) -> _Due | None:
        """The next deadline that came for a command still running; None after idling."""
        with self._changed:
            idle_since = self._clock()
            while True:
                while self._heap and self._heap[0].watched.finished:
                    heapq.heappop(self._heap)
                now = self._clock()
                if not self._heap:
                    if now - idle_since >= self._idle_seconds:
                        self._thread = None
                        return None
                    self._wakes_at = math.inf
                    self._changed.wait(self._idle_seconds - (now - idle_since))
                    continue
                idle_since = now
                if self._heap[0].at <= now:
                    self._wakes_at = math.inf
                    return heapq.heappop(self._heap)
                self._wakes_at = self._heap[0].at
                self._changed.wait(self._heap[0].at - now)

    def _run(self) -> None:
        while (due := self._next_due()) is not None:
            watched = due.watched
            if not due.stall_check:
                watched.stop(watched.limit_message)
                continue
            reason = watched.on_stall() if watched.on_stall is not None else None
            if reason is not None:
                watched.stop(reason)
            elif not watched.finished:
                self._push(_Due(watched.limit_at, next(self._order), watched, False))


def stop_and_reap(process: subprocess.Popen[Any], timeout: float = 5.0) -> None:
    """Wait for a killed process and close its pipes (what it wrote is not wanted)."""
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout)
