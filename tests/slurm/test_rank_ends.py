"""Each rank's own runs on the real test cluster: which rank failed first, the ranks' restarts, and
signals that still reach the program now that the rank shell outlives it (script.RANK_RUN)."""

from __future__ import annotations

import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
from jupyter_hyperpod.backends.slurm.rank_runs import RankRuns, read_rank_runs
from jupyter_hyperpod.core.models import JobSpec, JobState, RankFault, RankInfo
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
    once = f"failed-once-{os.environ['HYPERPOD_JOB_ID']}"
    if os.environ.get("FAIL_ONCE") == str(rank) and not os.path.exists(once):
        open(once, "w").close()
        time.sleep(2)
        print(f"rank {rank} fails once", flush=True)
        sys.exit(3)
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


def ends_job(name: str, seconds: int, launcher: str, env: dict[str, str], **spec: Any) -> JobSpec:
    """ends.py, sleeping `seconds` unless `env` makes a rank fail first."""
    return JobSpec(
        name=name,
        command=["ends.py", str(seconds)],
        workdir="project",
        launcher=launcher,
        env=env,
        **spec,
    )


def job_dir(tracked: Tracked) -> str:
    return str(tracked.job.data["job_dir_local"])


def ended(tracked: Tracked) -> dict[int, RankRuns]:
    return read_rank_runs(job_dir(tracked), tracked.job.spec.world_size)


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
    spec = ends_job(
        f"first-{launcher}", 300, launcher, {"FAIL_RANK": "2"}, nodes=2, procs_per_node=2
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
    spec = ends_job("signals", 300, "plain", {"CATCH": "1"}, nodes=2)
    tracked = submit(backend, settings, spec)
    wait_state(backend, tracked, {JobState.RUNNING})
    wait_for_log(backend, tracked, "rank {rank} up", ranks=2)
    slurm_id = tracked.job.backend_id or ""
    subprocess.run(["scancel", "--signal=USR1", slurm_id], check=True, timeout=30)
    wait_for_log(backend, tracked, "rank {rank} caught SIGUSR1", ranks=2)
    time.sleep(1)
    still = backend.refresh([tracked.job]).get(tracked.job.id)
    assert still is None or still.state == JobState.RUNNING
    assert {r: runs.ends for r, runs in ended(tracked).items()} == {0: [None], 1: [None]}

    tracked.apply(backend.cancel(tracked.job))
    wait_for_log(backend, tracked, "rank {rank} caught SIGTERM", ranks=2)
    deadline = time.monotonic() + 30
    while None in [runs.ends[-1] for runs in ended(tracked).values()]:
        assert time.monotonic() < deadline, ended(tracked)
        time.sleep(0.3)
    assert {r: [e.code for e in runs.ends if e] for r, runs in ended(tracked).items()} == {
        0: [0],
        1: [0],
    }
    # The ranks' records are read once Slurm has ended the job, which may lag their last line
    # (the batch step's teardown): refresh until it has.
    deadline = time.monotonic() + 60
    while True:
        update = backend.refresh([tracked.job]).get(tracked.job.id)
        if update is not None and update.state is not None and update.state.finished:
            break
        assert time.monotonic() < deadline, update
        time.sleep(0.3)
    assert [(r.state, r.exit_code) for r in update.ranks or []] == [("SUCCEEDED", 0)] * 2


def test_torchruns_restarts_are_each_ranks_history(
    backend: SlurmOrchestrator, settings: HyperPodSettings, program: Path
) -> None:
    """`--max-restarts=1`: rank 1 fails once, torchrun stops rank 0 and starts both again; the
    job succeeds. The restart is seen while the job runs, with the rank that caused it."""
    spec = ends_job("restarts", 8, "torchrun", {"FAIL_ONCE": "1"}, procs_per_node=2, max_retries=1)
    tracked = submit(backend, settings, spec)
    deadline = time.monotonic() + 120
    while tracked.job.data.get("restarts", 0) < 1:  # as the service polls
        assert time.monotonic() < deadline, (tracked.job.state, tracked.job.data)
        tracked.apply(backend.refresh([tracked.job]).get(tracked.job.id))
        time.sleep(0.3)
    assert tracked.job.state == JobState.RUNNING  # seen during the second attempt (8 s)
    assert [(r.restarts, r.state) for r in tracked.ranks or []] == [(1, "RUNNING")] * 2
    assert rank(tracked, 1).faults == [RankFault(restart=1, node="node1")]
    assert "restart 1 of the ranks: rank 1 failed first (exit code 3)" in tracked.job.events

    wait_state(backend, tracked, {JobState.SUCCEEDED, JobState.FAILED}, timeout=120)
    assert (tracked.job.state, tracked.exit_code) == (JobState.SUCCEEDED, 0)
    assert [(r.restarts, r.exit_code, r.state) for r in tracked.ranks or []] == [
        (1, 0, "SUCCEEDED")
    ] * 2
    assert rank(tracked, 1).faults == [RankFault(restart=1, node="node1")]
    assert rank(tracked, 0).faults == []
    first = {r: runs.ends[0] for r, runs in ended(tracked).items()}
    assert first[1] is not None and first[1].code == 3
    assert first[0] is not None and first[0].code == 143 and first[0].ended > first[1].ended
    log = backend.log_reader(tracked.job, 1).read(0, 100_000).decode()
    assert log.count("rank 1 up") == 2 and "rank 1 done" in log
