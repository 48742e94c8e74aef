"""The follower's spool file (backends/kubernetes/logs.py `_Spool`): what one read decoded goes
to the file in order whatever the number of pieces (more than a `writev` takes), a short write is
finished, and a pod holding several ranks is split per rank as well."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.kubernetes import logs
from jupyter_hyperpod.backends.kubernetes.logs import IOV_BATCH, RankSplitter, _Spool


def views(lines: list[bytes]) -> list[memoryview]:
    read = b"".join(lines)  # one read: the pieces are views into it, as the decoder yields
    view, pieces, position = memoryview(read), [], 0
    for line in lines:
        pieces.append(view[position : position + len(line)])
        position += len(line)
    return pieces


def test_more_pieces_than_one_writev_takes_arrive_in_order(tmp_path: Path) -> None:
    lines = [b"step %d loss 0.5\n" % i for i in range(IOV_BATCH * 3 + 7)]
    spool = tmp_path / "worker-0.log"
    with _Spool(spool, None) as out:
        assert out.append(views(lines[:10])) == len(b"".join(lines[:10]))
        assert out.append(views(lines[10:])) == len(b"".join(lines[10:]))
    assert spool.read_bytes() == b"".join(lines)


def test_a_short_write_is_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_writev = os.writev
    calls: list[int] = []

    def short_writev(fd: int, buffers: list[memoryview]) -> int:
        calls.append(len(buffers))
        first = buffers[0]
        return real_writev(fd, [first[: len(first) // 2]])  # as a signal can cut one short

    monkeypatch.setattr(logs.os, "writev", short_writev)
    lines = [b"alpha\n", b"beta\n", b"gamma\n"]
    spool = tmp_path / "worker-0.log"
    with _Spool(spool, None) as out:
        out.append(views(lines))
    assert calls == [3]
    assert spool.read_bytes() == b"alpha\nbeta\ngamma\n"


def test_a_pod_of_several_ranks_is_split_per_rank_too(tmp_path: Path) -> None:
    ranks = [tmp_path / "rank-0.log", tmp_path / "rank-1.log"]
    splitter = RankSplitter(ranks)
    lines = [b"[default0]:loss 1\n", b"[default1]:loss 2\n", b"torchrun says hi\n"]
    with _Spool(tmp_path / "worker-0.log", splitter) as out:
        out.append(views(lines[:2]))
        out.append(views([lines[2][:5]]))  # a line cut between two reads
        out.append(views([lines[2][5:]]))
    splitter.close()
    assert (tmp_path / "worker-0.log").read_bytes() == b"".join(lines)
    assert ranks[0].read_bytes() == b"loss 1\ntorchrun says hi\n"
    assert ranks[1].read_bytes() == b"loss 2\n"


def test_a_line_torchrun_copied_in_two_reads_goes_whole_to_its_rank(tmp_path: Path) -> None:
    """As CI saw it: rank 2's print wrote its text and its newline apart, torchrun's tee read
    between the two and rank 0's line came in the middle."""
    ranks = [tmp_path / f"rank-{index}.log" for index in range(3)]
    splitter = RankSplitter(ranks)
    splitter.write(b"[default2]:rank 2/6 step 1 loss 0.5000\n")
    splitter.write(b"[default2]:rank 2/6 step 2 loss 0.3333[default0]:rank 0/6 done\n")
    splitter.write(b"[default1]:rank 1/6 done\n[default2]:\n[default2]:rank 2/6 done\n")
    splitter.write(b"[default1]:cut short by the end")
    splitter.close()
    assert ranks[2].read_bytes() == (
        b"rank 2/6 step 1 loss 0.5000\nrank 2/6 step 2 loss 0.3333\nrank 2/6 done\n"
    )
    assert ranks[0].read_bytes() == b"rank 0/6 done\n"
    assert ranks[1].read_bytes() == b"rank 1/6 done\ncut short by the end\n"


def test_text_that_only_looks_like_a_prefix_stays_in_its_line(tmp_path: Path) -> None:
    ranks = [tmp_path / "rank-0.log", tmp_path / "rank-1.log"]
    splitter = RankSplitter(ranks)
    splitter.write(b"[default1]:parsed [x0]: and [default7]: as text\n")  # another role; rank 7
    splitter.write(b"no prefix [default1]: at all\n")  # torchrun's own lines: the first rank
    splitter.close()
    assert ranks[1].read_bytes() == b"parsed [x0]: and [default7]: as text\n"
    assert ranks[0].read_bytes() == b"no prefix [default1]: at all\n"


def test_a_note_starts_a_line_of_its_own_after_a_line_left_open(tmp_path: Path) -> None:
    """A container killed between a print's text and its newline (PYTHONUNBUFFERED writes them
    apart) leaves its last line open: the restart note must not be glued to it, also when the
    spool is opened again by a new follower."""
    spool = tmp_path / "worker-1.log"
    with _Spool(spool, None) as out:
        assert out.ends_line
        out.append_line("[jupyter-hyperpod] first")  # an empty spool: no blank line first
        out.append(views([b"step 3 loss 0.25\n", b"step 4 loss 0.20"]))
        assert not out.ends_line
        out.append_line("[jupyter-hyperpod] worker 1 restarted")
        out.append(views([b"resumed\n"]))
        out.append_line("[jupyter-hyperpod] worker 1 restarted again")
        out.append(views([b"step 5", b""]))  # an empty piece says nothing about the line
    with _Spool(spool, None) as again:
        assert not again.ends_line
        again.append_line("[jupyter-hyperpod] a new follower")
    assert spool.read_text().splitlines() == [
        "[jupyter-hyperpod] first",
        "step 3 loss 0.25",
        "step 4 loss 0.20",
        "[jupyter-hyperpod] worker 1 restarted",
        "resumed",
        "[jupyter-hyperpod] worker 1 restarted again",
        "step 5",
        "[jupyter-hyperpod] a new follower",
    ]
