"""The tracker's refresh of our jobs, as the controller holds more of other people's jobs.

    python bench/slurm/bench_refresh_held.py [--held 0,1000,3000] [--rounds 15]

On the project's Slurm test cluster (started unless one runs), without accounting, as root (it
makes two accounts, as bench/queue does): `hpb-ours` has 20 queued jobs and 3 that ended,
`hpb-other` holds `--held` pending jobs (`sbatch --hold`, cancelled afterwards), as a busy
cluster's queue does. The backend refreshes ours as a server running as `hpb-ours` would (its
identity; the squeue it runs is the same whoever runs it), in turns with and without
`squeue -u hpb-ours` (`backend.squeue_user`): with more than one `-j` id, squeue loads every job
the controller holds and filters them itself; with one user, slurmctld packs that user's jobs
alone. Prints, for each size, the jobs the controller really holds (ended ones too, for
MinJobAge), the refreshes' medians (`-u`: this user's jobs; `all`: as before, every job), and
`scontrol -o -d show job` of every job beside them; then each column's exponent k of
cost ~ jobs held^k. (A server running as root gains nothing: squeue
takes uid 0 for "no user" and loads every job.)
"""

from __future__ import annotations

import argparse
import os
import pwd
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "slurm"))
sys.path.insert(0, str(ROOT / "bench" / "scale"))
from bench_scale import fit_exponent  # noqa: E402
from bench_slurm import CLUSTER, cluster_running  # noqa: E402
from common import median  # noqa: E402

from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator  # noqa: E402
from jupyter_hyperpod.backends.slurm.state import SlurmState  # noqa: E402
from jupyter_hyperpod.core.backend import StoredJob  # noqa: E402
from jupyter_hyperpod.core.identity import Identity, own_account  # noqa: E402
from jupyter_hyperpod.core.models import JobSpec, JobState  # noqa: E402
from jupyter_hyperpod.core.settings import HyperPodSettings  # noqa: E402

OURS = "hpb-ours"
OTHER = "hpb-other"


def ensure_user(name: str) -> int:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", name], check=True, capture_output=True)
        return pwd.getpwnam(name).pw_uid


def sbatch_as(user: str, count: int, *options: str, script: str = "true") -> list[str]:
    """`count` jobs submitted by `user` itself (munge signs its uid)."""
    ids = []
    sbatch = ["runuser", "-u", user, "--", "sbatch", "--parsable", "--output=/dev/null"]
    for _ in range(count):
        done = subprocess.run(
            [*sbatch, *options, "--wrap", script],
            capture_output=True,
            text=True,
            check=True,
            cwd="/",
        )
        ids.append(done.stdout.strip().split(";")[0])
    return ids


def stored(slurm_id: str, state: JobState) -> StoredJob:
    """One of our jobs as the tracker hands it to the backend (its output path already known,
    as after the refresh that saw it start)."""
    return StoredJob(
        id=f"bench-{slurm_id}",
        spec=JobSpec(name="bench", command=["true"], launcher="plain"),
        state=state,
        backend_id=slurm_id,
        created=time.time(),
        started=None,
        data=SlurmState(slurm_id=slurm_id, stdout="/dev/null", stdout_known=True),
    )


def every_job() -> tuple[float, int]:
    """`scontrol -o -d show job` of every job the controller holds: best of 3 in ms, and how many
    jobs it showed."""
    best, shown = float("inf"), b""
    for _ in range(3):
        start = time.perf_counter()
        shown = subprocess.run(
            ["scontrol", "-o", "-d", "show", "job"], capture_output=True, check=True
        ).stdout
        best = min(best, (time.perf_counter() - start) * 1000)
    return best, shown.count(b"JobId=")


def timed_turns(rounds: int, calls: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Each call once a round, in turns; the median of each in ms."""
    spent: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            spent[name].append((time.perf_counter() - start) * 1000)
    return {name: median(values) for name, values in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--held", default="0,1000,3000", help="sizes of the other user's queue")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: it makes two accounts and submits as each")
    uid = ensure_user(OURS)
    ensure_user(OTHER)
    started_cluster = not cluster_running()
    if started_cluster:
        subprocess.run(["bash", str(CLUSTER), "start"], check=True)
    identity = Identity(name=OURS, uid=uid, login=OURS, reader=own_account(), source="settings")
    try:
        with tempfile.TemporaryDirectory(prefix="hyperpod-bench-") as tmp:
            settings = HyperPodSettings(shared_fs_root=tmp, user=OURS)
            by_user = SlurmOrchestrator(settings=settings, identity=identity, standby_seconds=0)
            every = SlurmOrchestrator(settings=settings, identity=identity, standby_seconds=0)
            every._squeue_user = []  # as before: squeue of every job, filtered by squeue
            assert by_user._squeue_user == ["-u", OURS]
            ended = [stored(i, JobState.RUNNING) for i in sbatch_as(OURS, 3)]
            queued = [stored(i, JobState.PENDING) for i in sbatch_as(OURS, 20, "--hold")]
            time.sleep(3)  # the three end; the controller keeps them for MinJobAge
            for backend in (by_user, every):  # the same answers either way
                updates = backend.refresh(ended + queued)
                assert [updates[job.id].exit_code for job in ended] == [0, 0, 0], updates
                assert {updates[job.id].state for job in queued} == {JobState.PENDING}
            print(f"refresh of our jobs (no accounting), {args.rounds} rounds, medians in ms")
            head = ("held here", "20 queued, -u", "20 queued, all", "3 ended, -u", "3 ended, all")
            print(" ".join(f"{text:>14}" for text in (*head, "scontrol, all")))
            held: list[str] = []
            work: list[float] = []
            table: dict[str, list[float]] = {name: [] for name in (*head[1:], "scontrol, all")}
            for size in sorted(int(value) for value in args.held.split(",")):
                held += sbatch_as(OTHER, size - len(held), "--hold")
                figures = timed_turns(
                    args.rounds,
                    {
                        head[1]: lambda: by_user.refresh(queued),
                        head[2]: lambda: every.refresh(queued),
                        head[3]: lambda: by_user.refresh(ended),
                        head[4]: lambda: every.refresh(ended),
                    },
                )
                figures["scontrol, all"], holds = every_job()
                work.append(holds)
                row = [f"{holds:>14}"]
                for name, value in figures.items():
                    table[name].append(value)
                    row.append(f"{value:14.1f}")
                print(" ".join(row))
            exponents = [f"{fit_exponent(work, values):14.2f}" for values in table.values()]
            print(" ".join([f"{'k':>14}", *exponents]))
    finally:
        for user in (OURS, OTHER):
            subprocess.run(["scancel", "-u", user], capture_output=True, check=False)
        if started_cluster:
            subprocess.run(["bash", str(CLUSTER), "stop"], check=False)


if __name__ == "__main__":
    main()
