"""The cluster's queue through jupyter-hyperpod vs Slurm's own `squeue`, side by side.

    python bench/queue/bench_queue.py [--jobs 1000] [--rounds 10]

Starts the project's Slurm test cluster (scripts/slurm-test-cluster.sh) unless one is running,
queues `--jobs` held jobs submitted with `sbatch` by two OS users (created when missing), starts
a Jupyter server with the extension as one of them, and times
  - the first page (100 rows) of `GET /hyperpod/api/queue`, from the 2-second snapshot every page
    and filter share, and cold (`refresh=true`: one `squeue --json`, parsed, permissions of each
    log checked, my pending jobs explained), against the raw `squeue --json` and `squeue`;
  - "my jobs" (`mine=true`, second page) against `squeue -u <me>`.
Prints figures only: this machine has 2 cores shared with other work.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "slurm"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_slurm import CLUSTER, cluster_running  # noqa: E402
from common import columns, free_port, timed_pair  # noqa: E402

USERS = ("hpq-alice", "hpq-bob")


class Server:
    """`jupyter server` with the extension as USERS[0], orchestrator = slurm."""

    def __init__(self, work: Path) -> None:
        self.token = "bench-" + os.urandom(8).hex()
        self.port = free_port()
        fs = work / "fsx"
        (fs / "shared").mkdir(parents=True)
        config = {
            "ServerApp": {
                "jpserver_extensions": {"jupyter_hyperpod": True},
                "token": self.token,
                "port": self.port,
                "ip": "127.0.0.1",
                "open_browser": False,
                "allow_root": True,
                "root_dir": str(work),
            },
            "HyperPodApp": {
                "orchestrator": "slurm",
                "shared_fs_root": str(fs),
                "partition": "shared",
                "user": USERS[0],
                "job_store": str(work / "jobs.sqlite"),
            },
        }
        (work / "jupyter_server_config.json").write_text(json.dumps(config))
        env = {**os.environ, "JUPYTER_CONFIG_DIR": str(work), "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                f"--config={work / 'jupyter_server_config.json'}",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(work / "server.log", "wb"),  # noqa: SIM115 - lives as long as the server
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.get("cluster")
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"the server did not start: {(work / 'server.log').read_text()[-2000:]}")

    def get(self, path: str) -> object:
        import urllib.request

        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/hyperpod/api/{path}",
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()


def run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout


def ensure_users() -> None:
    for name in USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            run(["useradd", "--create-home", name])


def queue_jobs(count: int, work: Path) -> None:
    """Held jobs (they never start), half each user's, submitted as that user."""
    out = work / "out"
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    for index in range(count):
        user = USERS[index % 2]
        run(
            [
                "runuser",
                "-u",
                user,
                "--",
                "sbatch",
                "--parsable",
                "--hold",
                "-J",
                f"q{index}",
                f"--output={out}/%u-%j.out",
                "--wrap",
                "true",
            ]
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()

    ensure_users()
    started_cluster = not cluster_running()
    if started_cluster:
        subprocess.run(["bash", str(CLUSTER), "start"], check=True, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="hyperpod-queue-bench-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        try:
            started = time.perf_counter()
            queue_jobs(args.jobs, work)
            print(f"queued {args.jobs} jobs with sbatch in {time.perf_counter() - started:.1f} s")
            server = Server(work)
            try:
                first = server.get("queue?limit=100&refresh=true")
                assert first["total"] >= args.jobs, first["total"]  # type: ignore[index]
                size = len(run(["squeue", "--json"]))
                rows = [
                    (
                        "first page, shared snapshot",
                        "squeue --json",
                        timed_pair(
                            args.rounds,
                            lambda: server.get("queue?limit=100"),
                            lambda: run(["squeue", "--json"]),
                        ),
                    ),
                    (
                        "first page, cold (refresh=true)",
                        "squeue --json",
                        timed_pair(
                            args.rounds,
                            lambda: server.get("queue?limit=100&refresh=true"),
                            lambda: run(["squeue", "--json"]),
                        ),
                    ),
                    (
                        "first page, shared snapshot",
                        "squeue (text)",
                        timed_pair(
                            args.rounds,
                            lambda: server.get("queue?limit=100"),
                            lambda: run(["squeue"]),
                        ),
                    ),
                    (
                        "my jobs, page 2 (mine=true)",
                        f"squeue -u {USERS[0]}",
                        timed_pair(
                            args.rounds,
                            lambda: server.get("queue?mine=true&limit=100&offset=100"),
                            lambda: run(["squeue", "-u", USERS[0]]),
                        ),
                    ),
                ]
            finally:
                server.stop()
        finally:
            for user in USERS:
                subprocess.run(["scancel", "-u", user], capture_output=True, check=False)
            if started_cluster:
                subprocess.run(["bash", str(CLUSTER), "stop"], capture_output=True, check=False)
    print(
        f"\n{args.jobs} jobs in the queue ({size / 1e6:.1f} MB of squeue --json), "
        f"{args.rounds} rounds, ms (median p90)\n"
    )
    print(
        f"{'jupyter-hyperpod':34} {'median':>7} {'p90':>7}   {'Slurm':22} {'median':>7} {'p90':>7}"
    )
    for ours_label, raw_label, (ours, raw) in rows:
        print(f"{ours_label:34} {columns(ours)}   {raw_label:22} {columns(raw)}")


if __name__ == "__main__":
    main()
