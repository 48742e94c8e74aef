"""The rank shell of the sbatch script, run here with bash: each rank's record of how and when its
program ended, and the signals the program still gets (the cluster tests: test_rank_ends.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.slurm.rank_exits import (
    RankExit,
    first_failure,
    parse_rank_exit,
    read_rank_exits,
)
from jupyter_hyperpod.backends.slurm.script import RANK_REDIRECT, RANK_RUN

RANK_SHELL = "\n".join([RANK_REDIRECT, *RANK_RUN])  # torchrun's; srun's adds the exports first

CATCHER = """
import signal, sys, time
def caught(number, _frame):
    print("caught", signal.Signals(number).name, flush=True)
    if number == signal.SIGTERM:
        sys.exit(0)
signal.signal(signal.SIGTERM, caught)
signal.signal(signal.SIGUSR1, caught)
open("ready", "w").close()
time.sleep(float(sys.argv[1]))
print("slept", flush=True)
"""


def start(directory: Path, *program: str, shell: str = RANK_SHELL) -> subprocess.Popen[bytes]:
    """The rank shell as torchrun starts it: its own session, RANK set, rank 1 (its own log)."""
    env = {**os.environ, "RANK": "1", "HYPERPOD_RANK_LOG_DIR": str(directory)}
    return subprocess.Popen(
        ["bash", "-c", shell, "rank", *program], cwd=directory, env=env, start_new_session=True
    )


def wait_ready(directory: Path) -> None:
    deadline = time.monotonic() + 60
    while not (directory / "ready").exists():
        assert time.monotonic() < deadline, "the program never started"
        time.sleep(0.01)


def record(directory: Path) -> RankExit:
    parsed = parse_rank_exit((directory / "rank-1.exit").read_text())
    assert parsed is not None
    return parsed


def test_a_program_that_exits_is_recorded_with_its_code_and_time(tmp_path: Path) -> None:
    before = time.time()
    shell = start(tmp_path, sys.executable, "-c", "print('hi'); raise SystemExit(3)")
    assert shell.wait(timeout=60) == 3
    done = record(tmp_path)
    assert done.code == 3 and before <= done.ended <= time.time()
    assert (tmp_path / "rank-1.log").read_text() == "hi\n"


def test_a_program_ended_by_a_signal_ends_its_shell_by_the_same_signal(tmp_path: Path) -> None:
    """As with `exec`: torchrun and Slurm see the rank die of SIGTERM, not exit 143."""
    shell = start(tmp_path, "sh", "-c", "touch ready; exec sleep 300")
    wait_ready(tmp_path)
    os.killpg(shell.pid, signal.SIGTERM)
    assert shell.wait(timeout=60) == -signal.SIGTERM
    assert record(tmp_path).code == 128 + signal.SIGTERM


def test_the_programs_own_handlers_get_the_signals(tmp_path: Path) -> None:
    """SIGUSR1 (`sbatch --signal`, before the time limit) ends nothing; SIGTERM reaches the
    program's handler, and its exit code is the rank's."""
    shell = start(tmp_path, sys.executable, "-c", CATCHER, "300")
    wait_ready(tmp_path)
    os.killpg(shell.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 60
    while "caught SIGUSR1" not in (tmp_path / "rank-1.log").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert shell.poll() is None and not (tmp_path / "rank-1.exit").exists()
    os.killpg(shell.pid, signal.SIGTERM)
    assert shell.wait(timeout=60) == 0
    assert record(tmp_path).code == 0
    assert (tmp_path / "rank-1.log").read_text() == "caught SIGUSR1\ncaught SIGTERM\n"


def test_a_burst_of_signals_still_leaves_a_record(tmp_path: Path) -> None:
    """Slurm, srun and torchrun may each signal a rank at its end. A `$(` expanded while a trap
    runs broke bash's parse, which lost the record (bash 5.2); this failed 4 of 50 rounds."""
    for round_number in range(50):
        directory = tmp_path / str(round_number)
        directory.mkdir()
        shell = start(directory, "sh", "-c", "touch ready; exec sleep 300")
        wait_ready(directory)
        for _ in range(20):
            try:
                os.killpg(shell.pid, signal.SIGTERM)
            except ProcessLookupError:
                break
            time.sleep(0)  # let the shell run between signals
        assert shell.wait(timeout=60) == -signal.SIGTERM
        log = (directory / "rank-1.log").read_text()
        assert "unexpected EOF" not in log and "error" not in log, log
        assert record(directory).code == 128 + signal.SIGTERM


def test_bash_without_epochrealtime_records_whole_seconds(tmp_path: Path) -> None:
    """Bash before 5.0 (Amazon Linux 2 has 4.2) has no EPOCHREALTIME."""
    shell = start(tmp_path, "true", shell="unset EPOCHREALTIME\n" + RANK_SHELL)
    assert shell.wait(timeout=60) == 0
    done = record(tmp_path)
    assert done.code == 0 and done.ended == int(done.ended)
    assert abs(done.ended - time.time()) < 60


def test_torchrun_passes_the_rank_shell_unchanged() -> None:
    """torchrun substitutes `${local_rank}` in the worker's arguments with string.Template."""
    from torch.distributed.elastic.utils.api import macros

    assert macros.substitute([RANK_SHELL], "3") == [RANK_SHELL]
    assert macros.substitute(["kill $$"], "3") == ["kill $"]  # why the shell has no `$$`


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3 1796137080.807092\n", RankExit(3, 1796137080.807092)),
        ("0 1796137080,5", RankExit(0, 1796137080.5)),  # a locale's decimal comma
        ("143 1796137080", RankExit(143, 1796137080.0)),
        ("", None),
        ("3", None),
        ("x 1796137080", None),
        ("3 1796137080 extra", None),
    ],
)
def test_records_are_parsed(text: str, expected: RankExit | None) -> None:
    assert parse_rank_exit(text) == expected


def test_records_are_read_for_the_jobs_ranks_only(tmp_path: Path) -> None:
    (tmp_path / "rank-0.exit").write_text("143 20.5\n")
    (tmp_path / "rank-1.exit").write_text("3 10.0\n")
    (tmp_path / "rank-2.exit").write_text("garbage\n")
    (tmp_path / "rank-9.exit").write_text("0 1.0\n")  # not a rank of a 4-rank job
    (tmp_path / "rank-1.log").write_text("log\n")
    found = read_rank_exits(str(tmp_path), world_size=4)
    assert found == {0: RankExit(143, 20.5), 1: RankExit(3, 10.0)}
    assert first_failure(found) == (1, RankExit(3, 10.0))
    assert read_rank_exits(str(tmp_path / "missing"), world_size=4) == {}


def test_the_first_failure_prefers_a_rank_that_failed_on_its_own_at_the_same_time() -> None:
    same = {0: RankExit(143, 5.0), 1: RankExit(3, 5.0), 2: RankExit(0, 1.0)}
    assert first_failure(same) == (1, RankExit(3, 5.0))
    assert first_failure({0: RankExit(0, 1.0)}) is None
