"""Values read at most once per `max_age` seconds a key (a running job's progress from its log
or its MLflow run): every reader takes the last value, the tracker's refresh reads again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class TimedCache(Generic[K, V]):
    def __init__(self, max_age: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self._clock = clock
        self._values: dict[K, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The last value read for `key`, however old; None if none was."""
        with self._lock:
            found = self._values.get(key)
        return found[1] if found else None

    def read(self, key: K, read: Callable[[], V]) -> V:
        """The value of `key`: `read()` again when the last one is older than `max_age`."""
        with self._lock:
            found = self._values.get(key)
        if found is not None and self._clock() - found[0] <= self.max_age:
            return found[1]
        value = read()
        with self._lock:
            self._values[key] = (self._clock(), value)
        return value

    def keep_only(self, keys: Iterable[K]) -> None:
        """Forget every key not in `keys` (the jobs that stopped running)."""
        wanted = set(keys)
        with self._lock:
            for key in set(self._values) - wanted:
                del self._values[key]

    def drop(self, key: K) -> None:
        with self._lock:
            self._values.pop(key, None)
