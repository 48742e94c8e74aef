"""One shared, short-lived answer for everyone polling the same figures.

Every open panel polls `GET gpu/nodes`; the figures behind it change once per scrape (HyperPod's
collectors scrape the DCGM exporter every 15 s). So one load serves all callers for `fresh`
seconds; after that the next caller still gets the last answer at once, up to `stale` seconds old,
while one load runs in the background; older than that (or the first time), callers wait for that
one load together. Nothing runs while nobody asks: a panel on standby costs the cluster nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")


class Snapshot(Generic[T]):
    def __init__(
        self,
        load: Callable[[], T],
        *,
        fresh: float,
        stale: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self.fresh = max(0.0, fresh)
        self.stale = max(self.fresh, stale if stale is not None else 6 * self.fresh)
        self._clock = clock
        self._lock = threading.Lock()
        self._value: T | None = None
        self._at = 0.0
        self._loading: Future[T] | None = None

    def get(self) -> T:
        """The current answer: cached, cached while a new one loads, or a new one."""
        if self.fresh == 0:
            return self._load()
        with self._lock:
            if self._value is not None:
                age = self._clock() - self._at
                if age < self.fresh:
                    return self._value
                if age < self.stale:
                    self._start()
                    return self._value
            loading = self._start()
        return loading.result()

    def clear(self) -> None:
        with self._lock:
            self._value = None

    def _start(self) -> Future[T]:
        """The load in progress, or a new one in its own thread (called with the lock held)."""
        if self._loading is not None:
            return self._loading
        future: Future[T] = Future()
        self._loading = future
        threading.Thread(target=self._run, args=(future,), name="gpu-snapshot", daemon=True).start()
        return future

    def _run(self, future: Future[T]) -> None:
        try:
            value = self._load()
        except BaseException as error:  # the callers waiting get it; the last answer stays
            with self._lock:
                self._loading = None
            future.set_exception(error)
            return
        with self._lock:
            self._value, self._at, self._loading = value, self._clock(), None
        future.set_result(value)
