"""One process at a time, across the jobs that share a file system (a sweep's members start
together): an exclusive `flock` on a lock file, held for the block. `flock` is what the shared
file systems jobs use honour across nodes (FSx for Lustre, NFSv4, a local disk)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Hold `lock` (created when missing, never removed: another process may be waiting on
    it) while the block runs."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
