"""Each rank's own end on the real test cluster: which rank failed first, and signals still reach
the program now that the rank shell outlives it (script.RANK_RUN)."""

from __future__ import annotations

import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
from jupyter_hyperpod.backends.slurm.rank_exits import read_rank_exits
from jupyter_hyperpod.core.models import JobSpec, JobState, RankInfo
from jupyter_hyperpod.core.settings import HyperPodSettings

from .conftest import Tracked, submit, wait_state

pytestmark = pytest.mark.slurm

PROGRAM = textwrap.dedent(
    """
    import os, signal, sys, time
    rank = int(os.environ["RANK"])

    def caught(number, _frame):
        print(f"rank {rank} caught {signal.Signals(number).name}", flush=True)
        if number == signal.SIGTERM:
            sys.exit(0)

    if os.environ.get("CATCH"):
        signal.signal(signal.SIGTERM, caught)
        signal.signal(signal.SIGUSR1, caught)
    print(f"rank {rank} up", flush=True)
    if os.environ.get("FAIL_RANK") == str(rank):
        time.sleep(2)
        print(f"rank {rank} fails", flush=True)
        sys.exit(3)
    time.sleep(float(sys.argv[1]))
    print(f"rank {rank} done", flush=True)
    """
)


@pytest.fixture
def program(project: Path) -> Path:
    path = project / "ends.py"
    path.write_text(PROGRAM)
    return path


def job_dir(tracked: Tracked) -> str:
    return str(tracked.job.data["job_dir_local"])


def rank(tracked: Tracked, number: int) -> RankInfo:
    return next(r for r in tracked.ranks or [] if r.rank == number)


def wait_for_log(backend: SlurmOrchestrator, tracked: Tracked, text: str, ranks: int) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        logs = [backend.log_reader(tracked.job, r).read(0, 100_000).decode() for r in range(ranks)]
        if all(text.format(rank=r) in log for r, log in enumerate(logs)):
            return
        time.sleep(0.3)
    raise AssertionError(f"{text!r} not in every rank's log: {logs}")


@pytest.mark.parametrize("launcher", ["plain", "torchrun"])
def test_the_rank_that_failed_first_is_named_with_its_own_end(
    backend: SlurmOrchestrator, settings: HyperPodSettings, program: Path, launcher: str
) -> None:
    """Rank 2 (the second node's first) fails; the others, still running, are stopped. Slurm
    gives one end for the whole step: the ranks' own records say rank 2 ended first."""
    spec = JobSpec(
        name=f"first-{launcher}",
        command=["ends.py", "300"],
        workdir="project",
        launcher=launcher,
        nodes=2,
        procs_per_node=2,
        env={"FAIL_RANK": "2"},
    )
    tracked = submit(backend, settings, spec)
    wait_state(backend, tracked, {JobState.FAILED, JobState.SUCCEEDED}, timeout=150)
    assert tracked.job.state == JobState.FAILED

    failed = rank(tracked, 2)
    assert (failed.state, failed.exit_code) == ("FAILED", 3)
    assert failed.ended is not None and tracked.ended is not None
    assert tracked.job.started is not None and tracked.job.started - 1 <= failed.ended
    assert failed.ended <= tracked.ended + 1  # Slurm's end has whole seconds
    others = [r for r in tracked.ranks or [] if r.rank != 2]
    # Stopped after it: by SIGTERM (torchrun on rank 2's node, its record says 143 and a later
    # time) or by SIGKILL (srun's --kill-on-bad-exit, which leaves no record).
    for other in others:
        assert other.ended is None or (other.ended > failed.ended and other.exit_code in (143, 137))
        assert other.node == ("node1" if other.rank < 2 else failed.node)
    assert "rank 2 failed first (exit code 3)" in (tracked.reason or ""), tracked.reason
    assert tracked.exit_code not in (None, 0)
    assert "rank 2 fails" in backend.log_reader(tracked.job, 2).read(0, 100_000).decode()


def test_signals_reach_the_program_under_the_rank_shell(
    backend: SlurmOrchestrator, settings: HyperPodSettings, program: Path
) -> None:
    """`scancel --signal=USR1` (what `sbatch --signal` sends before the time limit) reaches each
    program's own handler and ends nothing; `scancel`'s SIGTERM reaches it too, and the program's
    own exit code is recorded."""
    spec = JobSpec(
        name="signals",
        command=["ends.py", "300"],
        workdir="project",
        launcher="plain",
        nodes=2,
        env={"CATCH": "1"},
    )
    tracked = submit(backend, settings, spec)
    wait_state(backend, tracked, {JobState.RUNNING})
    wait_for_log(backend, tracked, "rank {rank} up", ranks=2)
    slurm_id = tracked.job.backend_id or ""
    subprocess.run(["scancel", "--signal=USR1", slurm_id], check=True, timeout=30)
    wait_for_log(backend, tracked, "rank {rank} caught SIGUSR1", ranks=2)
    time.sleep(1)
    still = backend.refresh([tracked.job]).get(tracked.job.id)
    assert still is None or still.state == JobState.RUNNING
    assert read_rank_exits(job_dir(tracked), 2) == {}  # both programs still run

    tracked.apply(backend.cancel(tracked.job))
    wait_for_log(backend, tracked, "rank {rank} caught SIGTERM", ranks=2)
    deadline = time.monotonic() + 30
    while len(exits := read_rank_exits(job_dir(tracked), 2)) < 2 and time.monotonic() < deadline:
        time.sleep(0.3)
    assert {r: e.code for r, e in exits.items()} == {0: 0, 1: 0}
    update = backend.refresh([tracked.job])[tracked.job.id]
    assert [(r.state, r.exit_code) for r in update.ranks or []] == [("SUCCEEDED", 0)] * 2
