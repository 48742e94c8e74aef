"""Listings show what is on disk now: a growing log shows its new size and time even though its
directory did not change; paging 100k entries still scans the directory once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from jupyter_hyperpod.core import partition as partition_module
from jupyter_hyperpod.core.partition import Partition


def _age(path: Path, seconds: float) -> None:
    """Set a directory's times in the past, as any directory not written for a while."""
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_a_growing_file_shows_its_new_size_and_time(tmp_path: Path) -> None:
    partition = Partition(tmp_path)
    logs = tmp_path / "run"
    logs.mkdir()
    log = logs / "rank-0.log"
    log.write_text("one\n")
    (logs / "checkpoint").mkdir()
    _age(logs, 60)
    directory_mtime = logs.stat().st_mtime_ns
    first = {e.name: e for e in partition.listing("run").entries}
    assert first["rank-0.log"].size == 4
    with open(log, "a") as handle:
        handle.write("two\nthree\n")
    later = time.time() + 5
    os.utime(log, (later, later))
    assert logs.stat().st_mtime_ns == directory_mtime  # appending does not touch the directory
    for sort in ("name", "-name", "size", "-size", "mtime", "-mtime"):
        entries = {e.name: e for e in partition.listing("run", sort=sort).entries}
        assert entries["rank-0.log"].size == 14, sort
        assert abs(entries["rank-0.log"].mtime - later) < 1, sort
    newest = partition.listing("run", sort="-mtime").entries[0]
    assert newest.name == "rank-0.log"  # the order follows the new time too


def test_paging_scans_once_while_the_directory_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for index in range(3000):
        (folder / f"f{index:05}").write_bytes(b"x" * (index % 7))
    _age(folder, 60)
    scans = []
    real_scan = partition_module.scan_directory

    def counted(path: Path) -> tuple[list[partition_module.Row], int]:
        scans.append(path)
        return real_scan(path)

    monkeypatch.setattr(partition_module, "scan_directory", counted)
    partition = Partition(tmp_path)
    names = []
    for offset in range(0, 3000, 500):
        names += [e.name for e in partition.listing("many", offset=offset, limit=500).entries]
    assert names == [f"f{index:05}" for index in range(3000)]
    assert len(scans) == 1
    (folder / "new").write_text("")
    assert partition.listing("many").total == 3001  # a new name: the directory changed
    assert len(scans) == 2
