"""Slurm through jupyter-hyperpod's REST API vs Slurm's own clients, side by side.

    python bench/slurm/bench_slurm.py [--rounds 10]

Starts the project's Slurm test cluster (scripts/slurm-test-cluster.sh) unless one is running, and
a Jupyter server with the extension driving it; then times
  - submit: `POST /hyperpod/api/jobs` (validation, the sbatch script written to the job directory,
    `sbatch --parsable`, the job store) and the backend alone vs `sbatch --parsable --wrap true`;
    the backend with the sbatch it starts ahead of each submit (standby.py, the default, as in a
    sweep or any submit within `standby_seconds` of the last) and without (a first submit);
  - nodes: `GET /hyperpod/api/nodes` (`sinfo --json` parsed into nodes; callers that come while
    one listing runs share it) vs raw `sinfo --json` and `sinfo -N`, and the backend alone;
  - status: the backend's refresh of 20 queued jobs (one squeue) vs one `squeue -j` per job;
  - where a submit's time goes: the service in this process (as the server runs it), each phase
    timed by a wrapper (validation and the rest, render, script write, sbatch, other Slurm
    commands, job store), and what REST adds on top.
Goals (issue 27): submit through REST <= 1.3x `sbatch --parsable`, the backend alone <= 1.1x,
nodes <= 1.2x `sinfo --json`; each printed as a ratio against its limit in the same run.
Prints figures only: timings depend on the machine (this one has 2 cores shared with others).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from common import columns, free_port, median, timed_pair  # noqa: E402

if TYPE_CHECKING:
    from jupyter_hyperpod.core.backend import StoredJob

CLUSTER = ROOT / "scripts" / "slurm-test-cluster.sh"
SETTLE = 0.005
"""Seconds between two timed submits: the sbatch the server starts ahead of the next submit
(backends/slurm/standby.py) has started by then, so that its start is not timed as the raw
sbatch's (the jobs themselves never start: `jobs_held`)."""


@contextlib.contextmanager
def jobs_held(slurm_ids: list[str]) -> Iterator[str]:
    """The default partition DOWN while submits are timed: Slurm queues their jobs but starts
    none. On this machine the test cluster's slurmd and each job's slurmstepd share the 2 cores
    with the submits, and the jobs a round started slowed the next round's submit by 2-5 ms
    (load average 3-9). Yields what the table says about it."""
    partition = next(
        (p.rstrip("*") for p in run(["sinfo", "-h", "-o", "%P"]).split() if p.endswith("*")), ""
    )
    down = subprocess.run(
        ["scontrol", "update", f"PartitionName={partition}", "State=DOWN"],
        capture_output=True,
        text=True,
        check=False,
    )
    if not partition or down.returncode != 0:
        yield "jobs ran as submitted (could not set the partition DOWN here)"
        return
    try:
        yield f"partition {partition} DOWN while submits are timed: jobs queued, none started"
    finally:
        if slurm_ids:  # cancelled before the partition is up again: none of them ever starts
            subprocess.run(["scancel", *slurm_ids], capture_output=True, check=False)
            slurm_ids.clear()
        subprocess.run(
            ["scontrol", "update", f"PartitionName={partition}", "State=UP"],
            capture_output=True,
            check=False,
        )


Row = tuple[str, str, tuple[list[float], list[float]]]


def submit_rows(
    rounds: int,
    api_submit: Callable[[], None],
    raw_submit: Callable[[], None],
    direct: Direct,
    cold: Direct,
) -> list[Row]:
    """Through REST, the backend alone, the backend without its standby: each against sbatch."""
    return [
        (
            "submit (1 node, 1 rank)",
            "sbatch --parsable",
            timed_pair(rounds, api_submit, raw_submit, settle=SETTLE),
        ),
        (
            "submit, backend only",
            "sbatch --parsable",
            timed_pair(rounds, lambda: direct.submit(["true"]), raw_submit, settle=SETTLE),
        ),
        (
            "submit, backend, no standby",
            "sbatch --parsable",
            timed_pair(rounds, lambda: cold.submit(["true"]), raw_submit, settle=SETTLE),
        ),
    ]


def cluster_running() -> bool:
    done = subprocess.run(["bash", str(CLUSTER), "status"], capture_output=True, check=False)
    return done.returncode == 0


class Server:
    """`jupyter server` with the extension, orchestrator = slurm, on a temporary file system."""

    def __init__(self, work: Path) -> None:
        self.token = secrets.token_hex(16)
        self._local = threading.local()
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
        """One request on this thread's kept-alive connection, as a browser's panel sends it
        (a new TCP connection and urllib's opener for each took 0.4-2 ms more)."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = http.client.HTTPConnection(
                "127.0.0.1", self.port, timeout=60
            )
        try:
            connection.request(
                method,
                f"/hyperpod/api/{path}",
                body=None if body is None else json.dumps(body).encode(),
                headers={
                    "Authorization": f"token {self.token}",
                    "Content-Type": "application/json",
                },
            )
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            connection.close()
            self._local.connection = None
            raise
        if response.status >= 400:
            raise OSError(f"{method} {path}: {response.status} {data[:300]!r}")
        return json.loads(data or b"null")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Direct:
    """SlurmOrchestrator without HTTP, the service or the job store."""

    def __init__(self, work: Path, slurm_ids: list[str], *, standby_seconds: float) -> None:
        sys.path.insert(0, str(ROOT))
        from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
        from jupyter_hyperpod.core.settings import HyperPodSettings

        self.work = work
        self.slurm_ids = slurm_ids
        self.backend = SlurmOrchestrator(
            settings=HyperPodSettings(shared_fs_root=str(work), user="b"),
            standby_seconds=standby_seconds,
        )
        self.count = 0

    def submit(self, command: list[str]) -> StoredJob:
        """One job (the script, then sbatch); returns it as the service keeps it."""
        from jupyter_hyperpod.backends.slurm.state import SlurmState
        from jupyter_hyperpod.core.backend import Launch, StoredJob
        from jupyter_hyperpod.core.models import JobSpec, JobState

        self.count += 1
        spec = JobSpec(name="bench", command=command, launcher="plain")
        job_dir = self.work / "direct" / f"{id(self)}-{self.count}"
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

    def nodes_uncached(self) -> object:
        """sinfo --json parsed into nodes (node_cache_seconds 0, the default: every time)."""
        self.backend.node_cache_seconds = 0.0
        return self.backend.list_nodes()

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


class Phases:
    """Time spent in wrapped callables, by phase, in the thread that made this (the tracker's
    background refreshes are not the submit's); only the outermost wrapped call counts (a
    render inside a submit is the render's, not the submit's twice)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._thread = threading.get_ident()
        self._depth = 0

    def wrap(self, owner: object, name: str, phase: str | Callable[..., str]) -> None:
        original = getattr(owner, name)

        def timed(*args: object, **kwargs: object) -> object:
            if self._depth or threading.get_ident() != self._thread:
                return original(*args, **kwargs)
            self._depth += 1
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self._depth -= 1
                label = phase(*args, **kwargs) if callable(phase) else phase
                self.spent[label] = self.spent.get(label, 0.0) + time.perf_counter() - start
                self.calls[label] = self.calls.get(label, 0) + 1

        setattr(owner, name, timed)


def submit_phases(work: Path, rounds: int, slurm_ids: list[str]) -> tuple[Phases, float]:
    """`rounds` submits through the service in this process; the phases and the median total."""
    import pathlib

    from jupyter_hyperpod.core.service import HyperPodService
    from jupyter_hyperpod.core.settings import HyperPodSettings
    from jupyter_hyperpod.core.store import JobStore
    from jupyter_hyperpod.wiring import Wiring

    fs = work / "phases"
    (fs / "shared").mkdir(parents=True)
    settings = HyperPodSettings(
        orchestrator="slurm",
        shared_fs_root=str(fs),
        partition="shared",
        user="bench",
        job_store=str(work / "phases.sqlite"),
    )
    service = HyperPodService(settings, adapters=Wiring())
    body = {"name": "bench", "command": ["true"], "launcher": "plain"}
    slurm_ids.append(service.submit(body).backend_id or "")  # warm-up
    phases = Phases()
    backend = service.orchestrator
    phases.wrap(backend, "render", "render")
    commands = backend.commands  # type: ignore[attr-defined]
    phases.wrap(
        commands,
        "run",
        lambda name, *_, **__: name if name == "sbatch" else f"other Slurm ({name})",
    )
    original_write = pathlib.Path.write_text
    phases.wrap(pathlib.Path, "write_text", "script write")
    for name in ("insert", "update", "get", "claim_start"):
        if hasattr(JobStore, name):
            phases.wrap(service.store, name, "job store")
    totals = []
    try:
        for _ in range(rounds):
            time.sleep(SETTLE)
            start = time.perf_counter()
            job = service.submit(body)
            totals.append(time.perf_counter() - start)
            slurm_ids.append(job.backend_id or "")
    finally:
        pathlib.Path.write_text = original_write  # type: ignore[method-assign]
        service.close()
    whole = sum(totals)
    phases.spent["validation and the rest"] = whole - sum(phases.spent.values())
    phases.calls["validation and the rest"] = rounds
    return phases, median(totals) * 1000


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
        direct = Direct(server.fs / "shared", slurm_ids, standby_seconds=300.0)
        cold = Direct(server.fs / "shared", slurm_ids, standby_seconds=0.0)
        try:
            spec = {"name": "bench", "command": ["true"], "launcher": "plain"}

            def api_submit() -> None:
                job = server.call("POST", "jobs", spec)
                slurm_ids.append(job["backend_id"])  # type: ignore[index]

            def raw_submit() -> None:
                out = run(["sbatch", "--parsable", f"--output={work}/raw-%j.out", "--wrap", "true"])
                slurm_ids.append(out.strip().split(";")[0])

            api_nodes = lambda: server.call("GET", "nodes")  # noqa: E731
            with jobs_held(slurm_ids) as held:
                rows = submit_rows(args.rounds, api_submit, raw_submit, direct, cold)
                phases, in_process = submit_phases(work, args.rounds, slurm_ids)
            rows += [
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
                (
                    "list nodes, backend alone",
                    "sinfo --json",
                    timed_pair(
                        args.rounds, direct.nodes_uncached, lambda: run(["sinfo", "--json"])
                    ),
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
            for backend in (direct, cold):
                backend.backend.close()
            server.stop()
            if slurm_ids:
                subprocess.run(["scancel", *slurm_ids], capture_output=True, check=False)
            if started_cluster:
                subprocess.run(["bash", str(CLUSTER), "stop"], capture_output=True, check=False)

    print(
        f"Slurm {version} test cluster, "
        f"{nodes} nodes, {os.cpu_count()} CPUs here, {args.rounds} rounds after one warm-up; ms"
    )
    print(f"submits: {held}, {SETTLE * 1000:g} ms apart")
    head = f"{'operation':30} {'ours: median':>12} {'p90':>7}   {'raw':18} {'median':>7} {'p90':>7}"
    print(f"{head}  ratio")
    ratios = {}
    for name, raw_name, (ours, raw) in rows:
        ratio = median(ours) / median(raw)
        ratios[(name, raw_name)] = ratio
        print(f"{name:30} {columns(ours):>20}   {raw_name:18} {columns(raw)}  {ratio:5.2f}x")
    rest = median(rows[0][2][0])
    print(f"\nwhere a submit's time goes ({args.rounds} submits through the service in-process,")
    print(f"median {in_process:.1f} ms; through REST {rest:.1f} ms: HTTP and JSON add the rest)")
    whole = sum(phases.spent.values())
    for phase, spent in sorted(phases.spent.items(), key=lambda item: -item[1]):
        calls = phases.calls[phase] / args.rounds
        print(
            f"  {phase:26} {spent / args.rounds * 1000:6.2f} ms a submit  {spent / whole:5.1%}"
            f"  ({calls:g} calls a submit)"
        )
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for (name, raw_name), limit in (
        (("submit (1 node, 1 rank)", "sbatch --parsable"), 1.3),
        (("submit, backend only", "sbatch --parsable"), 1.1),
        (("list nodes", "sinfo --json"), 1.2),
    ):
        ratio = ratios[(name, raw_name)]
        verdict = "met" if ratio <= limit else "NOT met"
        print(f"goal {name} vs {raw_name}: {ratio:.2f}x, limit {limit}x ({verdict})")


if __name__ == "__main__":
    main()
