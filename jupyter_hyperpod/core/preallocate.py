"""Room reserved ahead of a file that grows by appends, on the file system where that saves work.

ext4 allocates an appended file's blocks late (delayed allocation): every page a write adds is
first reserved, one by one, and placed when it is written back. A range reserved ahead with
`fallocate(FALLOC_FL_KEEP_SIZE)` is placed at once, as one unwritten extent, and the writes into
it skip the per-page reservation: on this machine's ext4, eight spools appended about 256 KiB at
a time took 0.80x-0.86x the CPU (`bench/kubernetes/bench.py --only logs`). `KEEP_SIZE` leaves the
file's size alone, so a reader never sees the reserved range; what is left of it is given back
when the file is closed (truncating a file to its own size frees the blocks past its end).
systemd-journald also allocates its files ahead of its writes, in steps (`journal_file_allocate`,
src/libsystemd/sd-journal/journal-file.c), with `posix_fallocate`, which grows the size: right
for its mapped files, wrong for a log that readers follow to its end.

Where it costs more it is not done: tmpfs zeroes every page `fallocate` reserves, then the write
copies over it (a third more CPU for the same follow); and on file systems not measured here
(XFS, which preallocates past the end by itself, Lustre, NFS, btrfs, overlay) nothing is
reserved.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from .environment import MOUNTINFO, parse_mountinfo

log = logging.getLogger(__name__)

FALLOC_FL_KEEP_SIZE = 0x01
"""linux/falloc.h: allocate without changing the file's size."""

LAZY_ALLOCATING = frozenset({"ext4"})
"""File systems with delayed allocation where reserving ahead was measured to save CPU."""

FIRST_STEP = 64 * 1024
LARGEST_STEP = 8 * 1024 * 1024
"""Each reservation is as large as the file so far (a quiet log reserves little, a fast one
doubles), between these bounds; so an open file never holds more than this much unused."""

Fallocate = Callable[[int, int, int, int], None]
"""fallocate(fd, mode, offset, length); raises OSError."""


def _libc_fallocate() -> Fallocate | None:
    """glibc's fallocate(2) wrapper, or None where there is none (not Linux)."""
    name = ctypes.util.find_library("c")
    try:
        function = ctypes.CDLL(name, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int

    def fallocate(fd: int, mode: int, offset: int, length: int) -> None:
        if function(fd, mode, offset, length) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return fallocate


FALLOCATE = _libc_fallocate()

_types: dict[int, str] = {}
_types_lock = threading.Lock()


def filesystem_type(fd: int, mountinfo: str = MOUNTINFO) -> str:
    """The type of the file system holding `fd` ('ext4', 'tmpfs', ...), from the mount whose
    device is the file's (`parse_mountinfo`); '' where it cannot be told."""
    device = os.fstat(fd).st_dev
    with _types_lock:
        known = _types.get(device)
    if known is not None:
        return known
    try:
        text = Path(mountinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""  # not Linux, or no /proc: not remembered, nothing reserved
    wanted = f"{os.major(device)}:{os.minor(device)}"
    found = next((m.fstype for m in parse_mountinfo(text) if m.device == wanted), "")
    with _types_lock:
        _types[device] = found
    return found


class RoomAhead:
    """Reserves room ahead of the appends to `fd` (opened for appending), where its file system
    gains from it; else does nothing. One writer at a time, as a spool
    has: `release` trims the file to its size as this writer knows it."""

    def __init__(
        self,
        fd: int,
        *,
        fallocate: Fallocate | None = FALLOCATE,
        fs_type: Callable[[int], str] = filesystem_type,
    ) -> None:
        self.fd = fd
        stat = os.fstat(fd)
        self.size = stat.st_size
        self.reserved_to = self.size
        self.fallocate = fallocate if fallocate and fs_type(fd) in LAZY_ALLOCATING else None
        if self.fallocate is not None and stat.st_blocks * 512 > _whole_blocks(stat):
            self._trim()  # room a writer that did not close (killed) left reserved

    @property
    def active(self) -> bool:
        return self.fallocate is not None

    def before_append(self, length: int) -> None:
        """Make sure the next `length` bytes fall in reserved room (one step more when not)."""
        end = self.size + length
        if self.fallocate is None or end <= self.reserved_to:
            return
        step = min(max(self.size, FIRST_STEP), LARGEST_STEP)
        target = max(end, self.reserved_to) + step
        try:
            self.fallocate(
                self.fd, FALLOC_FL_KEEP_SIZE, self.reserved_to, target - self.reserved_to
            )
        except OSError as error:
            # Not supported here after all, or the disk is (nearly) full: then the write says so.
            log.debug("no more room reserved ahead of a spool: %s", error)
            self.fallocate = None
            return
        self.reserved_to = target

    def appended(self, length: int) -> None:
        self.size += length

    def release(self) -> None:
        """Give back what is reserved past the end (before the file is closed)."""
        if self.reserved_to > self.size:
            self._trim()
            self.reserved_to = self.size

    def _trim(self) -> None:
        try:
            os.ftruncate(self.fd, os.fstat(self.fd).st_size)
        except OSError as error:
            log.debug("could not give back the room reserved ahead of a spool: %s", error)


def _whole_blocks(stat: os.stat_result) -> int:
    """The file's size rounded up to its blocks: what it occupies with nothing reserved."""
    block = stat.st_blksize or 4096
    return -(-stat.st_size // block) * block
