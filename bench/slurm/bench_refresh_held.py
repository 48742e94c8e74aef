"""The tracker's refresh of our ended jobs, as the controller holds more of other people's jobs.

    python bench/slurm/bench_refresh_held.py [--held 0,500,1500] [--rounds 15]

On the project's Slurm test cluster (started unless one runs), without accounting: three of our
jobs end, and the backend's refresh (what the server's tracker runs every few seconds) learns
their exit codes from scontrol, while the controller also holds `--held` pending jobs of someone
else (`sbatch --hold`, cancelled afterwards), as a busy cluster's queue does. Prints the jobs the
controller really holds (ended ones too, for MinJobAge), the refresh's median and p90, and
`scontrol -o -d show job` of every job beside them: a refresh that asked for every job (as before
55d7b61) grows with that last column.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "slurm"))
from bench_slurm import CLUSTER, Direct, cluster_running  # noqa: E402
from common import columns  # noqa: E402


def hold_jobs(count: int) -> list[str]:
    ids = []
    for _ in range(count):
        done = subprocess.run(
            ["sbatch", "--hold", "--parsable", "--output=/dev/null", "--wrap", "true"],
            capture_output=True,
            text=True,
            check=True,
        )
        ids.append(done.stdout.strip().split(";")[0])
    return ids


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--held", default="0,500,1500", help="sizes of the held queue")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    started_cluster = not cluster_running()
    if started_cluster:
        subprocess.run(["bash", str(CLUSTER), "start"], check=True)
    held: list[str] = []
    slurm_ids: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="hyperpod-bench-") as tmp:
            direct = Direct(Path(tmp), slurm_ids, standby_seconds=0.0)
            ours = [direct.submit(["true"]) for _ in range(3)]
            time.sleep(3)  # they end; the controller keeps them for MinJobAge
            print(f"refresh of 3 ended jobs (no accounting), {args.rounds} rounds; ms")
            print(f"{'held here':>10}  {'refresh median':>14} {'p90':>7}  {'scontrol, all':>14}")
            for size in sorted(int(value) for value in args.held.split(",")):
                held += hold_jobs(size - len(held))
                refreshes = []
                for _ in range(args.rounds):
                    start = time.perf_counter()
                    updates = direct.backend.refresh(ours)
                    refreshes.append((time.perf_counter() - start) * 1000)
                    assert {update.exit_code for update in updates.values()} == {0}, updates
                everything, holds = every_job()
                median, p90 = columns(refreshes).split()
                print(f"{holds:>10}  {median:>14} {p90:>7}  {everything:14.1f}")
    finally:
        for chunk in range(0, len(held + slurm_ids), 500):
            ids = (held + slurm_ids)[chunk : chunk + 500]
            subprocess.run(["scancel", *ids], capture_output=True, check=False)
        if started_cluster:
            subprocess.run(["bash", str(CLUSTER), "stop"], check=False)


if __name__ == "__main__":
    main()
