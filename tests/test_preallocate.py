"""Room reserved ahead of an appended file (core/preallocate.py): on ext4 only, never
visible in the file's size, given back at the end and after a writer that was killed; a file
system that refuses turns it off without losing a byte."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.kubernetes.logs import _Spool
from jupyter_hyperpod.core import preallocate
from jupyter_hyperpod.core.preallocate import (
    FALLOC_FL_KEEP_SIZE,
    FIRST_STEP,
    LARGEST_STEP,
    RoomAhead,
    filesystem_type,
)

SHM = Path("/dev/shm")


def findmnt_type(path: Path) -> str:
    done = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--target", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()[0]


def type_of(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return filesystem_type(fd)
    finally:
        os.close(fd)


def occupied(path: Path) -> int:
    return os.stat(path).st_blocks * 512


@pytest.fixture
def lazy_dir(tmp_path: Path) -> Path:
    """A directory on a file system where room is reserved (this machine's /tmp is ext4)."""
    if type_of(tmp_path) not in preallocate.LAZY_ALLOCATING or preallocate.FALLOCATE is None:
        pytest.skip(f"{tmp_path} is on {type_of(tmp_path) or 'an unknown file system'}")
    return tmp_path


@pytest.mark.skipif(shutil.which("findmnt") is None, reason="needs util-linux findmnt")
def test_the_file_system_type_is_the_one_findmnt_names(tmp_path: Path) -> None:
    places = [tmp_path] + ([SHM] if SHM.is_dir() else [])
    for place in places:
        assert type_of(place) == findmnt_type(place)


def test_room_is_reserved_ahead_never_shown_in_the_size_and_given_back(lazy_dir: Path) -> None:
    spool = lazy_dir / "worker-0.log"
    data = os.urandom(3 * 1024 * 1024 + 123)
    pieces = [memoryview(data)[i : i + 256 * 1024] for i in range(0, len(data), 256 * 1024)]
    with _Spool(spool, None) as out:
        assert out.room.active
        for piece in pieces:
            out.append([piece])
            assert os.stat(spool).st_size == out.room.size  # readers see only what is written
        assert occupied(spool) > len(data) + FIRST_STEP  # the next step is already placed
        assert out.room.reserved_to - len(data) <= LARGEST_STEP
    assert spool.read_bytes() == data
    assert occupied(spool) <= len(data) + os.stat(spool).st_blksize  # given back at the end


def test_room_left_by_a_killed_writer_is_given_back_when_the_spool_reopens(lazy_dir: Path) -> None:
    spool = lazy_dir / "worker-0.log"
    spool.write_bytes(b"step 1\n")
    fd = os.open(spool, os.O_WRONLY | os.O_APPEND)
    assert preallocate.FALLOCATE is not None
    preallocate.FALLOCATE(fd, FALLOC_FL_KEEP_SIZE, 0, 4 * 1024 * 1024)
    os.close(fd)  # as a follower killed before its release
    assert occupied(spool) >= 4 * 1024 * 1024
    with _Spool(spool, None) as out:
        assert occupied(spool) <= os.stat(spool).st_blksize
        out.append([memoryview(b"step 2\n")])
    assert spool.read_bytes() == b"step 1\nstep 2\n"


@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm")
def test_nothing_is_reserved_on_tmpfs() -> None:
    # tmpfs zeroes what fallocate reserves and the write then copies over it: it costs more.
    if type_of(SHM) != "tmpfs":
        pytest.skip("/dev/shm is not tmpfs here")
    spool = SHM / f"hyperpod-test-{os.getpid()}.log"
    try:
        with _Spool(spool, None) as out:
            assert not out.room.active
            out.append([memoryview(b"x" * 300_000)])
            assert occupied(spool) < 300_000 + 8192
    finally:
        spool.unlink(missing_ok=True)


def test_steps_follow_the_size_between_their_bounds(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []

    def recording(fd: int, mode: int, offset: int, length: int) -> None:
        assert mode == FALLOC_FL_KEEP_SIZE
        calls.append((offset, length))

    fd = os.open(tmp_path / "spool", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        room = RoomAhead(fd, fallocate=recording, fs_type=lambda _: "ext4")
        for length in [100] * 50 + [256 * 1024] * 200:
            room.before_append(length)
            assert room.size + length <= room.reserved_to <= room.size + length + LARGEST_STEP
            room.appended(length)
    finally:
        os.close(fd)
    # Contiguous ranges, each at least the first step and at most the largest one past the end
    # the write needed; a quiet start reserves a little, a fast log grows to the largest steps.
    assert [offset for offset, _ in calls[1:]] == [o + n for o, n in calls[:-1]]
    assert calls[0] == (0, 100 + FIRST_STEP)
    assert max(length for _, length in calls) <= LARGEST_STEP + 256 * 1024
    assert len(calls) < 20  # 50 MiB in steps that double up to 8 MiB


def test_a_file_system_that_refuses_turns_it_off_and_loses_nothing(tmp_path: Path) -> None:
    refused: list[int] = []

    def unsupported(fd: int, mode: int, offset: int, length: int) -> None:
        refused.append(length)
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    spool = tmp_path / "worker-0.log"
    with _Spool(
        spool, None, room=lambda fd: RoomAhead(fd, fallocate=unsupported, fs_type=lambda _: "ext4")
    ) as out:
        out.append([memoryview(b"alpha\n")])
        out.append([memoryview(b"beta\n")])
        assert not out.room.active
    assert len(refused) == 1  # asked once, then never again
    assert spool.read_bytes() == b"alpha\nbeta\n"


def test_other_file_systems_are_left_alone(tmp_path: Path) -> None:
    def never(fd: int, mode: int, offset: int, length: int) -> None:
        raise AssertionError("fallocate called")

    for kind in ("xfs", "lustre", "nfs4", "btrfs", "overlay", "tmpfs", ""):
        fd = os.open(tmp_path / f"spool-{kind}", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            room = RoomAhead(fd, fallocate=never, fs_type=lambda _, kind=kind: kind)
            room.before_append(1 << 20)
            assert not room.active
        finally:
            os.close(fd)
