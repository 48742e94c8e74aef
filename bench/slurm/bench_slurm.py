"""Slurm through jupyter-hyperpod's REST API vs Slurm's own clients, side by side.

    python bench/slurm/bench_slurm.py [--rounds 10]

Starts the project's Slurm test cluster (scripts/slurm-test-cluster.sh) unless one is running, and
a Jupyter server with the extension driving it; then times
  - submit: `POST /hyperpod/api/jobs` (validation, the sbatch script written to the job directory,
    `sbatch --parsable`, the job store) and the backend alone vs `sbatch --parsable --wrap true`;
  - nodes: `GET /hyperpod/api/nodes` (`sinfo --json` parsed into nodes) vs raw `sinfo --json` and
    `sinfo -N`;
  - status: the backend's refresh of 20 queued jobs (one squeue) vs one `squeue -j` per job.
Prints figures only: timings depend on the machine (this one has 2 cores shared with others).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from common import columns, free_port, median, timed_pair  # noqa: E402

if TYPE_CHECKING:
    from jupyter_hyperpod.backends.base import StoredJob

CLUSTER = ROOT / "scripts" / "slurm-test-cluster.sh"


def cluster_running() -> bool:
    done = subprocess.run(["bash", str(CLUSTER), "status"], capture_output=True, check=False)
    return done.returncode == 0


class Server:
    """`jupyter server` with the extension, orchestrator = slurm, on a temporary file system."""

    def __init__(self, work: Path) -> None:
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.fs = work / "fsx"
        (self.fs / "shared").mkdir(parents=True)
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
                "shared_fs_root": str(self.fs),
                "partition": "shared",
                "user": "bench",
                "job_store": str(work / "jobs.sqlite"),
                "refresh_interval": 2.0,
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
                self.call("GET", "cluster")
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"the server did not start: {(work / 'server.log').read_text()[-2000:]}")

    def call(self, method: str, path: str, body: object = None) -> object:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/hyperpod/api/{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read() or b"null")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Direct:
    """SlurmOrchestrator without HTTP, the service or the job store."""

    def __init__(self, work: Path, slurm_ids: list[str]) -> None:
        sys.path.insert(0, str(ROOT))
        from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
        from jupyter_hyperpod.core.settings import HyperPodSettings

        self.work = work
        self.slurm_ids = slurm_ids
        self.backend = SlurmOrchestrator(
            settings=HyperPodSettings(shared_fs_root=str(work), user="b")
        )
        self.count = 0

    def submit(self, command: list[str]) -> StoredJob:
        """One job (the script, then sbatch); returns it as the service keeps it."""
        from jupyter_hyperpod.backends.base import Launch, StoredJob
        from jupyter_hyperpod.backends.slurm.state import SlurmState
        from jupyter_hyperpod.core.models import JobSpec, JobState

        self.count += 1
        spec = JobSpec(name="bench", command=command, launcher="plain")
        job_dir = self.work / "direct" / str(self.count)
        launch = Launch(
            job_id=job_dir.name,
            spec=spec,
            user="b",
            command=command,
            workdir=str(self.work),
            job_dir=str(job_dir),
            job_dir_local=job_dir,
        )
        update = self.backend.submit(launch)
        self.slurm_ids.append(update.backend_id or "")
        return StoredJob(
            id=job_dir.name,
            spec=spec,
            state=update.state or JobState.PENDING,
            backend_id=update.backend_id,
            created=time.time(),
            started=None,
            data=SlurmState.load(update.data),
        )

    def status_rows(self, rounds: int, jobs: int) -> tuple[list[float], list[float]]:
        """One batched refresh of `jobs` queued jobs vs one `squeue -j` per job."""
        stored = [self.submit(["sleep", "300"]) for _ in range(jobs)]
        ids = [job.backend_id or "" for job in stored]
        time.sleep(2)  # let them start, and keep what the first refresh learns, as the service does
        for job_id, update in self.backend.refresh(stored).items():
            job = next(job for job in stored if job.id == job_id)
            job.state = update.state or job.state
            job.data = job.data.merged(update.data)

        def one_by_one() -> None:
            for slurm_id in ids:
                run(["squeue", "-h", "-j", slurm_id])

        return timed_pair(rounds, lambda: self.backend.refresh(stored), one_by_one)


def run(command: list[str]) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=20, help="queued jobs for the status row")
    args = parser.parse_args()

    started_cluster = not cluster_running()
    if started_cluster:
        subprocess.run(["bash", str(CLUSTER), "start"], check=True, capture_output=True)
    slurm_ids: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hyperpod-bench-") as tmp:
        work = Path(tmp)
        server = Server(work)
        try:
            spec = {"name": "bench", "command": ["true"], "launcher": "plain"}

            def api_submit() -> None:
                job = server.call("POST", "jobs", spec)
                slurm_ids.append(job["backend_id"])  # type: ignore[index]

            def raw_submit() -> None:
                out = run(["sbatch", "--parsable", f"--output={work}/raw-%j.out", "--wrap", "true"])
                slurm_ids.append(out.strip().split(";")[0])

            direct = Direct(server.fs / "shared", slurm_ids)
            api_nodes = lambda: server.call("GET", "nodes")  # noqa: E731
            rows = [
                (
                    "submit (1 node, 1 rank)",
                    "sbatch --parsable",
                    timed_pair(args.rounds, api_submit, raw_submit),
                ),
                (
                    "submit, backend only",
                    "sbatch --parsable",
                    timed_pair(args.rounds, lambda: direct.submit(["true"]), raw_submit),
                ),
                (
                    "list nodes",
                    "sinfo --json",
                    timed_pair(args.rounds, api_nodes, lambda: run(["sinfo", "--json"])),
                ),
                (
                    "list nodes",
                    "sinfo -N",
                    timed_pair(args.rounds, api_nodes, lambda: run(["sinfo", "-N"])),
                ),
            ]
            rows.append(
                (
                    f"status of {args.jobs} jobs: 1 refresh",
                    f"{args.jobs} x squeue -j",
                    direct.status_rows(args.rounds, args.jobs),
                )
            )
            nodes = len(server.call("GET", "nodes")["nodes"])  # type: ignore[index]
            version = run(["sinfo", "-V"]).split()[-1]
        finally:
            server.stop()
            if slurm_ids:
                subprocess.run(["scancel", *slurm_ids], capture_output=True, check=False)
            if started_cluster:
                subprocess.run(["bash", str(CLUSTER), "stop"], capture_output=True, check=False)

    print(
        f"Slurm {version} test cluster, "
        f"{nodes} nodes, {os.cpu_count()} CPUs here, {args.rounds} rounds after one warm-up; ms"
    )
    head = f"{'operation':30} {'ours: median':>12} {'p90':>7}   {'raw':18} {'median':>7} {'p90':>7}"
    print(f"{head}  ratio")
    for name, raw_name, (ours, raw) in rows:
        ratio = median(ours) / median(raw)
        print(f"{name:30} {columns(ours):>20}   {raw_name:18} {columns(raw)}  {ratio:5.2f}x")


if __name__ == "__main__":
    main()
