"""Slurm through jupyter-hyperpod's REST API vs Slurm's own clients, side by side.

    python bench/slurm/bench_slurm.py [--rounds 10]

Starts the project's Slurm test cluster (scripts/slurm-test-cluster.sh) unless one is running, and
a Jupyter server with the extension driving it; then times
  - submit: `POST /hyperpod/api/jobs` (validation, sbatch script, `sbatch --parsable`, the job's
    output path from `scontrol`, the job store) vs a raw `sbatch --parsable --wrap true`;
  - nodes: `GET /hyperpod/api/nodes` (`sinfo --json` parsed into nodes) vs raw `sinfo --json` and
    `sinfo -N`.
Prints figures only: timings depend on the machine (this one has 2 cores shared with others).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "scripts" / "slurm-test-cluster.sh"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def timed_pair(
    rounds: int, ours: Callable[[], object], raw: Callable[[], object]
) -> tuple[list[float], list[float]]:
    """Both actions in turns (one warm-up each), so that load on the machine hits both alike."""
    ours()
    raw()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for action, into in ((ours, times[0]), (raw, times[1])):
            start = time.perf_counter()
            action()
            into.append((time.perf_counter() - start) * 1000)
    return times


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):7.1f} {p90:7.1f}"


def backend_submit(work: Path, slurm_ids: list[str]) -> Callable[[], None]:
    """SlurmOrchestrator.submit alone (no HTTP, service, job store): sbatch, then scontrol."""
    sys.path.insert(0, str(ROOT))
    from jupyter_hyperpod.backends.base import Launch
    from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
    from jupyter_hyperpod.core.models import JobSpec
    from jupyter_hyperpod.core.settings import HyperPodSettings

    settings = HyperPodSettings(shared_fs_root=str(work / "fsx"), user="bench")
    backend = SlurmOrchestrator(settings=settings)
    spec = JobSpec(name="bench", command=["true"], launcher="plain")
    counter = iter(range(1_000_000))

    def submit() -> None:
        job_dir = work / "fsx" / "shared" / "direct" / str(next(counter))
        launch = Launch(
            job_id=job_dir.name,
            spec=spec,
            user="bench",
            command=["true"],
            workdir=str(work),
            job_dir=str(job_dir),
            job_dir_local=job_dir,
        )
        slurm_ids.append(backend.submit(launch).backend_id or "")

    return submit


def run(command: list[str]) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
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
                    timed_pair(args.rounds, backend_submit(work, slurm_ids), raw_submit),
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
    head = f"{'operation':26} {'ours: median':>12} {'p90':>7}   {'raw':18} {'median':>7} {'p90':>7}"
    print(f"{head}  ratio")
    for name, raw_name, (ours, raw) in rows:
        ratio = statistics.median(ours) / statistics.median(raw)
        print(f"{name:26} {summary(ours):>20}   {raw_name:18} {summary(raw)}  {ratio:4.1f}x")


if __name__ == "__main__":
    main()
