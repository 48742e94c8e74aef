"""The rank shell of the sbatch script, run here with bash: each rank's record of when its program
started and how and when it ended, and the signals the program still gets (the cluster tests:
test_rank_ends.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from jupyter_hyperpod.backends.slurm.rank_runs import (
    RankEnd,
    RankRuns,
    apply_runs,
    attempts,
    failure_reason,
    first_failure,
    parse_rank_runs,
    read_attempts,
    read_rank_runs,
    restart_event,
)
from jupyter_hyperpod.backends.slurm.script import RANK_REDIRECT, RANK_RUN
from jupyter_hyperpod.core.models import JobState, RankFault, RankInfo

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


def record(directory: Path) -> RankEnd:
    """The end of the rank's only run."""
    runs = parse_rank_runs((directory / "rank-1.runs").read_text())
    assert len(runs.starts) == 1 and runs.ends[0] is not None, runs
    assert runs.starts[0] <= runs.ends[0].ended
    return runs.ends[0]


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
    assert shell.poll() is None
    assert parse_rank_runs((tmp_path / "rank-1.runs").read_text()).ends == [None]  # running
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


def test_records_are_parsed_run_by_run() -> None:
    text = (
        "start - 10.0\n"
        "end 143 12.5\n"  # stopped after another rank failed, then restarted
        "start - 13,0\n"  # a locale's decimal comma
        "end 3 x\n"  # a malformed line (a node that crashed mid-write) is skipped
        "garbage\n"
        "start - 20.0\n"  # killed by SIGKILL: no end
    )
    runs = parse_rank_runs(text)
    assert runs.starts == [10.0, 13.0, 20.0]
    assert runs.ends == [RankEnd(143, 12.5), None, None]
    assert runs.restarts == 2 and runs.end_of(0) == RankEnd(143, 12.5) and runs.end_of(5) is None
    assert parse_rank_runs("end 0 1.0\n") == RankRuns()  # an end without its start


def test_records_are_read_for_the_jobs_ranks_only(tmp_path: Path) -> None:
    (tmp_path / "rank-0.runs").write_text("start - 1.0\nend 143 20.5\n")
    (tmp_path / "rank-1.runs").write_text("start - 1.0\nend 3 10.0\n")
    (tmp_path / "rank-2.runs").write_text("garbage\n")
    (tmp_path / "rank-9.runs").write_text("start - 1.0\n")  # not a rank of a 4-rank job
    (tmp_path / "rank-1.log").write_text("log\n")
    found = read_rank_runs(str(tmp_path), world_size=4)
    assert sorted(found) == [0, 1]
    assert first_failure(found, 0) == (1, RankEnd(3, 10.0))
    assert (attempts(found), read_attempts(str(tmp_path))) == (1, 1)
    assert read_rank_runs(str(tmp_path / "missing"), world_size=4) == {}
    assert read_attempts(str(tmp_path / "missing")) == 0


def test_the_first_failure_prefers_a_rank_that_failed_on_its_own_at_the_same_time() -> None:
    def ended(code: int, when: float) -> RankRuns:
        return RankRuns(starts=[0.0], ends=[RankEnd(code, when)])

    same = {0: ended(143, 5.0), 1: ended(3, 5.0), 2: ended(0, 1.0)}
    assert first_failure(same, 0) == (1, RankEnd(3, 5.0))
    assert first_failure({0: ended(0, 1.0)}, 0) is None


def test_restarts_become_each_ranks_faults_and_the_jobs_events() -> None:
    """Attempt 0: rank 1 failed (torchrun stopped rank 0 and restarted both); attempt 1: rank 0
    failed, rank 1 was stopped, and the job failed."""
    runs = {
        0: RankRuns(starts=[0.0, 20.0], ends=[RankEnd(143, 10.2), RankEnd(2, 30.0)]),
        1: RankRuns(starts=[0.0, 20.0], ends=[RankEnd(3, 10.0), RankEnd(143, 30.1)]),
    }
    ranks = [RankInfo(rank=r, node="node1", state="FAILED") for r in (0, 1)]
    done = apply_runs(ranks, runs, JobState.FAILED)
    assert [(r.restarts, r.exit_code, r.ended, r.state) for r in done] == [
        (1, 2, 30.0, "FAILED"),
        (1, 143, 30.1, "FAILED"),
    ]
    assert done[0].faults == [RankFault(restart=None, node="node1")]
    assert done[1].faults == [RankFault(restart=1, node="node1")]
    assert restart_event(runs, 1) == "restart 1 of the ranks: rank 1 failed first (exit code 3)"
    assert failure_reason("FAILED (NonZeroExitCode)", JobState.FAILED, runs) == (
        "FAILED (NonZeroExitCode): rank 0 failed first (exit code 2)"
    )
    # While it runs: restarts and the faults behind them, no exit code yet.
    running = {r: RankRuns(starts=v.starts, ends=[v.ends[0], None]) for r, v in runs.items()}
    ranks = [RankInfo(rank=r, node="node1", state="RUNNING") for r in (0, 1)]
    live = apply_runs(ranks, running, JobState.RUNNING)
    assert [(r.restarts, r.exit_code, r.state, r.faults) for r in live] == [
        (1, None, "RUNNING", []),
        (1, None, "RUNNING", [RankFault(restart=1, node="node1")]),
    ]
    assert failure_reason(None, JobState.RUNNING, running) is None
