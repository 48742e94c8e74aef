"""How the cost grows with the work: a real Jupyter server with the extension on 127.0.0.1 (the
local backend), each series at growing sizes, each ending with the exponent k of a power-law fit
(cost ~ work^k: 1 is linear, above 1 a path that grows faster than the work) and a PNG plot.

    python bench/scale/bench_scale.py [--history 10,1000,10000,100000] [--running 1,16,64]
        [--ranks 8] [--followers 1,40,200] [--rate 500] [--seconds 6] [--out bench/scale/out]
        [--nodes 20,200,2000] [--events 100,1000,5000]
        [--only history,running,followers,nodes,refresh]

1. Job history (finished rows in the job store): GET jobs, a page of 100, and the same filtered
   by state, p50/p99 over kept-alive connections; the server's RSS. Goal: p99 < 20 ms at 100,000.
2. Running jobs x ranks on the local backend, silent (`sleep`) and printing a step line every
   0.2 s: the server's CPU per status refresh of the tracker (state only; then with progress
   parsing and the watchdog's step clocks, and their difference), per rank.
   Goal: linear in the ranks, < 1 ms per rank.
3. Followers of one job that prints `--rate` lines/s, each following as the panel does (data in
   binary frames): lines each follower received (none may be lost), write-to-client latency
   p99, the server's CPU. Goal: 200 followers, p99 < 100 ms.
4. A cluster of 20 / 200 / 2,000 nodes on the doubles: Slurm's `list_nodes()` over a `sinfo`
   printing a recorded `sinfo --json` (vs that sinfo alone) and the Kubernetes API server
   double's (tests/kubernetes/emulator.py, watch cache), each also with the REST body's JSON;
   Slurm's queue of one job per node (`queue()` over a recorded `squeue --json`).
5. The Kubernetes backend's refresh of 4 waiting and 4 running jobs among `--events` other
   warning events in their namespace (and 4 times as many other pods), on the API server double:
   the median wall time and the refreshing thread's CPU (the client's own work: the double
   shares this process).
Prints figures only; no time is asserted (the machine is shared: compare the exponents).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import math
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil
import websocket  # websocket-client

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(REPO))
from common import free_port, percentile  # noqa: E402

from jupyter_hyperpod.core.logframes import FRAMES_QUERY, LogEvent  # noqa: E402

TOKEN = "bench-token"
SLEEPER = "import time\ntime.sleep(3600)\n"
STEPPER = (
    "import sys, time\n"
    "# A training loop's log: a step line every 0.2 s (progress parsing and the watchdog's\n"
    "# step clocks read each one), with a tqdm-like redraw between.\n"
    "for step in range(1, 100000):\n"
    "    print(f'step {step}/100000 loss 0.{step % 997:03d} lr 2.0e-04 tokens/s 12345.6', flush=True)\n"
    "    time.sleep(0.2)\n"
)
WRITER = (
    "import sys, time\n"
    "rate, seconds = float(sys.argv[1]), float(sys.argv[2])\n"
    "time.sleep(float(sys.argv[3]))  # the followers connect first\n"
    "start = time.time()\n"
    "i = 0\n"
    "while time.time() - start < seconds:\n"
    "    sys.stdout.write(f'line {i} {time.time():.6f}\\n'); sys.stdout.flush(); i += 1\n"
    "    time.sleep(max(0.0, start + i / rate - time.time()))\n"
    "print(f'total {i}', flush=True)\n"
)


class Server:
    """`jupyter server` with the extension on the local backend, in its own work directory."""

    def __init__(self, parallel: int = 4, refresh: float = 1.0) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
        self.fs = self.work / "fsx"
        (self.fs / "shared").mkdir(parents=True)
        (self.fs / "shared" / "sleeper.py").write_text(SLEEPER)
        (self.fs / "shared" / "writer.py").write_text(WRITER)
        (self.fs / "shared" / "stepper.py").write_text(STEPPER)
        self.store = self.work / "jobs.sqlite"
        self.port = free_port()
        env = {
            **os.environ,
            "HYPERPOD_FS_ROOT": str(self.fs),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter",
                "server",
                f"--port={self.port}",
                "--ip=127.0.0.1",
                f"--ServerApp.token={TOKEN}",
                "--ServerApp.allow_root=True",
                "--no-browser",
                f"--ServerApp.root_dir={self.work}",
                "--HyperPodApp.orchestrator=local",
                f"--HyperPodApp.refresh_interval={refresh}",
                f"--HyperPodApp.local_max_parallel_jobs={parallel}",
                "--ServerApp.jpserver_extensions={'jupyter_hyperpod': True}",
                f"--HyperPodApp.job_store={self.store}",
                "--ServerApp.log_level=WARN",
            ],
            env=env,
            cwd=self.work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.ps = psutil.Process(self.process.pid)
        deadline = time.monotonic() + 90
        while True:
            try:
                self.call("GET", "cluster")
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def call(self, method: str, route: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/hyperpod/api/{route}",
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def cpu_seconds(self) -> float:
        """CPU time of the server process (its own threads; jobs are other processes)."""
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def rss_mib(self) -> float:
        return float(self.ps.memory_info().rss) / 2**20

    def stop(self) -> None:
        os.killpg(self.process.pid, 15)
        self.process.wait(timeout=60)
        shutil.rmtree(self.work, ignore_errors=True)


def latencies(server: Server, route: str, seconds: float, clients: int = 2) -> list[float]:
    """Each client calls `route` on one kept-alive connection for `seconds`; latencies in ms."""
    found: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        headers = {"Authorization": f"token {TOKEN}"}
        mine: list[float] = []
        while time.monotonic() < stop or not mine:
            started = time.perf_counter()
            connection.request("GET", f"/hyperpod/api/{route}", headers=headers)
            response = connection.getresponse()
            response.read()
            assert response.status == 200, response.status
            mine.append((time.perf_counter() - started) * 1000)
        connection.close()
        with lock:
            found.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return found


def grow_history(store: Path, like: str, total: int) -> None:
    """Finished copies of job `like` until the store holds `total` rows, over the last weeks."""
    with sqlite3.connect(store, timeout=60) as db:
        db.row_factory = sqlite3.Row
        have = db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        row = dict(db.execute("SELECT * FROM jobs WHERE id = ?", (like,)).fetchone())
        now = time.time()
        copies = []
        for i in range(have, total):
            created = now - 86400 * 30 + i * 10
            state = "FAILED" if i % 10 == 0 else "SUCCEEDED"
            copies.append(
                {
                    **row,
                    "id": f"hist{i:07d}",
                    "name": f"hist{i:07d}",
                    "state": state,
                    "created": created,
                    "started": created + 1,
                    "ended": created + 300,
                    "exit_code": 1 if state == "FAILED" else 0,
                }
            )
        if copies:
            keys = list(copies[0])
            db.executemany(
                f"INSERT INTO jobs ({', '.join(keys)}) VALUES ({', '.join('?' * len(keys))})",
                [[copy[k] for k in keys] for copy in copies],
            )


def fit_exponent(work: Sequence[float], cost: Sequence[float]) -> float:
    """k of cost ~ work^k, least squares on the logarithms (points with a cost > 0)."""
    pairs = [(math.log(w), math.log(c)) for w, c in zip(work, cost, strict=True) if c > 0]
    if len(pairs) < 2:
        return float("nan")
    mean_x = sum(x for x, _ in pairs) / len(pairs)
    mean_y = sum(y for _, y in pairs) / len(pairs)
    spread = sum((x - mean_x) ** 2 for x, _ in pairs)
    return sum((x - mean_x) * (y - mean_y) for x, y in pairs) / spread if spread else float("nan")


def plot(
    out: Path, name: str, xlabel: str, work: list[float], series: dict[str, list[float]]
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for label, cost in series.items():
        axes.plot(work, cost, marker="o", label=f"{label} (k={fit_exponent(work, cost):.2f})")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel(xlabel)
    axes.set_title(name)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    path = out / f"{name.replace(' ', '_')}.png"
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def report(
    out: Path, name: str, xlabel: str, work: list[float], columns: dict[str, list[float]]
) -> None:
    """The table, each column's exponent, and the plot."""
    print(f"\n{name}")
    print(f"  {xlabel:>12} " + " ".join(f"{label:>16}" for label in columns))
    for i, size in enumerate(work):
        print(f"  {size:12,.0f} " + " ".join(f"{values[i]:16.3f}" for values in columns.values()))
    print(
        f"  {'k (power law)':>12} "
        + " ".join(f"{fit_exponent(work, v):16.2f}" for v in columns.values())
    )
    print(f"  plot: {plot(out, name, xlabel, work, columns)}")


def in_state(server: Server, job_id: str, state: str) -> Callable[[], bool]:
    return lambda: bool(server.call("GET", f"jobs/{job_id}")["state"] == state)


def running_at_least(server: Server, count: int) -> Callable[[], bool]:
    return lambda: bool(server.call("GET", "jobs?state=RUNNING&limit=1")["total"] >= count)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


def bench_history(sizes: list[int], seconds: float, out: Path) -> None:
    server = Server()
    try:
        seed = server.call("POST", "jobs", {"name": "seed", "command": ["sleeper.py"]})
        server.call("DELETE", f"jobs/{seed['id']}")
        wait_until(in_state(server, seed["id"], "CANCELLED"), 60, "the cancel")
        columns: dict[str, list[float]] = {
            "page p50 ms": [],
            "page p99 ms": [],
            "FAILED p50 ms": [],
            "FAILED p99 ms": [],
            "RSS MiB": [],
        }
        for size in sizes:
            grow_history(server.store, seed["id"], size)
            page = latencies(server, "jobs?limit=100", seconds)
            failed = latencies(server, "jobs?limit=100&state=FAILED", seconds)
            total = server.call("GET", "jobs?limit=1")["total"]
            assert total >= size, (total, size)
            columns["page p50 ms"].append(percentile(page, 0.5))
            columns["page p99 ms"].append(percentile(page, 0.99))
            columns["FAILED p50 ms"].append(percentile(failed, 0.5))
            columns["FAILED p99 ms"].append(percentile(failed, 0.99))
            columns["RSS MiB"].append(server.rss_mib())
        report(out, "job history GET jobs", "rows", [float(s) for s in sizes], columns)
    finally:
        server.stop()


def tracker_cpu(counts: list[int], ranks: int, seconds: float, command: list[str]) -> list[float]:
    """Server CPU ms per tracker refresh with 1..N running jobs of `ranks` ranks running
    `command` (refresh every 0.5 s)."""
    server = Server(parallel=max(counts), refresh=0.5)
    per_refresh: list[float] = []
    running: list[str] = []
    try:
        for count in counts:
            while len(running) < count:
                body = {
                    "name": f"run{len(running)}",
                    "command": command,
                    "procs_per_node": ranks,
                    "launcher": "plain",
                }
                running.append(server.call("POST", "jobs", body)["id"])
            wait_until(running_at_least(server, count), 120, f"{count} running jobs")
            time.sleep(1.5)  # settle: the first refreshes after a submit read more
            cpu, wall = server.cpu_seconds(), time.monotonic()
            time.sleep(seconds)
            used, elapsed = server.cpu_seconds() - cpu, time.monotonic() - wall
            refreshes = elapsed / 0.5  # the tracker refreshes every refresh_interval
            per_refresh.append(used / refreshes * 1000)
    finally:
        for job_id in running:
            with contextlib.suppress(OSError):
                server.call("DELETE", f"jobs/{job_id}")
        server.stop()
    return per_refresh


def bench_running(counts: list[int], ranks: int, seconds: float, out: Path) -> None:
    """The tracker's CPU with silent ranks (state only) and with ranks printing a step line
    every 0.2 s (the same plus progress parsing and the watchdog's step clocks)."""
    silent = tracker_cpu(counts, ranks, seconds, ["/bin/sleep", "3600"])
    steps = tracker_cpu(counts, ranks, seconds, ["stepper.py"])
    work = [float(c * ranks) for c in counts]
    columns = {
        "silent ms/refresh": silent,
        "steps ms/refresh": steps,
        "steps us/rank": [cost / w * 1000 for cost, w in zip(steps, work, strict=True)],
        "parse+clock ms": [max(0.0, a - b) for a, b in zip(steps, silent, strict=True)],
    }
    report(out, "running jobs tracker", "ranks", work, columns)


def sinfo_document(count: int) -> dict:
    """`sinfo --json` (Slurm 22.05's keys) of `count` 8-GPU nodes, half of them busy."""
    nodes = [
        {
            "name": f"gpu-{i:05d}",
            "state": "mixed" if i % 2 else "idle",
            "state_flags": ["DRAIN"] if i % 97 == 0 else [],
            "reason": "GPU 3 fails its health check" if i % 97 == 0 else "",
            "cpus": 192,
            "real_memory": 2000000,
            "gres": "gpu:h100:8",
            "gres_used": f"gpu:h100:{8 if i % 2 else 0}(IDX:0-7)",
            "partitions": ["train", "debug"] if i % 10 == 0 else ["train"],
            "active_features": "h100,efa",
        }
        for i in range(count)
    ]
    return {"meta": {}, "errors": [], "nodes": nodes}


def squeue_document(count: int, work: Path) -> dict:
    """`squeue --json` (Slurm 22.05's keys) of one running 8-GPU job per node of `count`, of
    ten users; their output files under `work`."""
    now = int(time.time())
    jobs = [
        {
            "job_id": 1000 + i,
            "name": f"train-{i}",
            "user_name": f"user{i % 10}",
            "user_id": 2000 + i % 10,
            "job_state": "RUNNING" if i % 4 else "PENDING",
            "state_reason": "None" if i % 4 else "Resources",
            "node_count": 1,
            "nodes": f"gpu-{i:05d}",
            "partition": "train",
            "priority": 4294901000 - i,
            "submit_time": now - 3600,
            "start_time": now - 1800,
            "batch_flag": True,
            "standard_output": str(work / f"slurm-{1000 + i}.out"),
            "current_working_directory": str(work),
            "tres_alloc_str": "cpu=192,mem=2000G,node=1,billing=192,gres/gpu=8",
            "tres_req_str": "cpu=192,mem=2000G,node=1,billing=192,gres/gpu=8",
        }
        for i in range(count)
    ]
    return {"meta": {}, "errors": [], "jobs": jobs}


def bench_nodes(counts: list[int], rounds: int, out: Path) -> None:
    """`list_nodes()` and its REST body as the cluster grows, on the doubles: Slurm's (a
    `sinfo` that prints a recorded `sinfo --json`; the backend's cache off: the parse is timed)
    and the Kubernetes API server's (tests/kubernetes/emulator.py, over HTTP, the watch cache)."""
    sys.path.insert(0, str(REPO))
    from pydantic import TypeAdapter
    from traitlets.config import Config

    from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
    from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
    from jupyter_hyperpod.core.models import Node
    from jupyter_hyperpod.core.settings import HyperPodSettings
    from tests.kubernetes.conftest import node_object
    from tests.kubernetes.emulator import EmulatorThread

    body = TypeAdapter(list[Node])
    work = Path(tempfile.mkdtemp(prefix="bench-scale-nodes-"))
    columns: dict[str, list[float]] = {
        "sinfo (cat) ms": [],
        "Slurm list ms": [],
        "Slurm +JSON ms": [],
        "k8s cache ms": [],
        "k8s +JSON ms": [],
        "squeue (cat) ms": [],
        "Slurm queue ms": [],
    }

    def p50(function: Callable[[], object]) -> float:
        return p50_ms(function, rounds)[0]

    emulator = EmulatorThread()
    emulator.start()
    try:
        bin_dir = work / "bin"
        bin_dir.mkdir()
        (bin_dir / "scontrol").write_text("#!/bin/sh\nprintf 'ClusterName = double\\n'\n")
        (bin_dir / "sinfo").write_text(f"#!/bin/sh\nexec cat {work / 'sinfo.json'}\n")
        (bin_dir / "squeue").write_text(f"#!/bin/sh\nexec cat {work / 'squeue.json'}\n")
        for name in ("scontrol", "sinfo", "squeue"):
            (bin_dir / name).chmod(0o755)
        config = Config()
        config.HyperPodSettings.shared_fs_root = str(work)
        config.SlurmOrchestrator.bin_dir = str(bin_dir)
        config.SlurmOrchestrator.node_cache_seconds = 0.0
        slurm = SlurmOrchestrator(settings=HyperPodSettings(config=config))
        kubeconfig = emulator.write_kubeconfig(work / "kubeconfig")
        config = Config()
        config.HyperPodSettings.shared_fs_root = str(work)
        config.KubernetesOrchestrator.kubeconfig = str(kubeconfig)
        config.KubernetesOrchestrator.image = "bench:latest"
        kubernetes = KubernetesOrchestrator(settings=HyperPodSettings(config=config))
        added = 0
        for count in counts:
            (work / "sinfo.json").write_text(json.dumps(sinfo_document(count)))
            (work / "squeue.json").write_text(json.dumps(squeue_document(count, work)))
            emulator.put_many("v1/nodes", [node_object(i) for i in range(added, count)])
            added = count
            assert len(slurm.list_nodes()) == count
            wait_until(
                functools.partial(lambda c: len(kubernetes.list_nodes()) == c, count),
                120,
                f"{count} nodes",
            )
            columns["sinfo (cat) ms"].append(
                p50(lambda: subprocess.run([str(bin_dir / "sinfo")], capture_output=True))
            )
            columns["Slurm list ms"].append(p50(slurm.list_nodes))
            columns["Slurm +JSON ms"].append(p50(lambda: body.dump_json(slurm.list_nodes())))
            columns["k8s cache ms"].append(p50(kubernetes.list_nodes))
            columns["k8s +JSON ms"].append(p50(lambda: body.dump_json(kubernetes.list_nodes())))
            assert len(slurm.queue().jobs) == count
            columns["squeue (cat) ms"].append(
                p50(lambda: subprocess.run([str(bin_dir / "squeue")], capture_output=True))
            )
            columns["Slurm queue ms"].append(p50(slurm.queue))
        kubernetes.close()
        slurm.close()
    finally:
        emulator.stop()
        shutil.rmtree(work, ignore_errors=True)
    report(out, "cluster nodes and queue", "nodes", [float(c) for c in counts], columns)


def p50_ms(function: Callable[[], object], rounds: int) -> tuple[float, float]:
    """The median wall time of `function` and of this thread's CPU in it, in ms, over `rounds`
    calls after a first one that is not timed."""
    function()
    times, cpu = [], []
    for _ in range(rounds):
        started, thread = time.perf_counter(), time.thread_time()
        function()
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - thread) * 1000)
    return percentile(times, 0.5), percentile(cpu, 0.5)


def pod_object(namespace: str, name: str, job: str | None, rank: int) -> dict:
    """A running pod; one of our job's (its labels, whole in the watch cache) or anyone's."""
    labels = {"training.kubeflow.org/replica-index": str(rank)}
    if job:
        labels["hyperpod.jupyter.org/job-id"] = job
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": f"node-{rank}", "containers": [{"name": "pytorch", "image": "i"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "pytorch", "restartCount": 0, "state": {"running": {}}, "ready": True}
            ],
        },
    }


def bench_kubernetes_refresh(loads: list[int], rounds: int, out: Path) -> None:
    """The Kubernetes backend's status refresh of our jobs (4 waiting, whose warning events it
    reads, and 4 running with 2 pods each) as the rest of the cluster grows around them: `load`
    other warning events in our namespace and 4 x `load` other pods in another one, on the API
    server double (tests/kubernetes/emulator.py, over HTTP, the watch cache on)."""
    from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
    from jupyter_hyperpod.backends.kubernetes.manifest import JOB_ID_LABEL, MANAGED_BY, MANAGER
    from jupyter_hyperpod.core.backend import StoredJob
    from jupyter_hyperpod.core.models import JobSpec, JobState
    from tests.kubernetes.conftest import make_settings, warning_event
    from tests.kubernetes.emulator import EmulatorThread

    work = Path(tempfile.mkdtemp(prefix="bench-scale-k8s-"))
    columns: dict[str, list[float]] = {}
    emulator = EmulatorThread()
    emulator.start()

    def job(name: str, running: bool) -> StoredJob:
        labels = {MANAGED_BY: MANAGER, JOB_ID_LABEL: name}
        status = {"conditions": [{"type": "Running", "status": "True"}]} if running else {}
        emulator.put(
            "kubeflow.org/v1/pytorchjobs",
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": name, "namespace": "default", "labels": labels},
                "spec": {},
                "status": status,
            },
        )
        for rank in range(2 if running else 0):
            emulator.put("v1/pods", pod_object("default", f"{name}-worker-{rank}", name, rank))
        job_dir = work / "jobs" / name
        job_dir.mkdir(parents=True)
        return StoredJob(
            id=name,
            spec=JobSpec(name=name, command=["x"], nodes=2),
            state=JobState.RUNNING if running else JobState.PENDING,
            backend_id=name,
            created=time.time(),
            started=None,
            data={"namespace": "default", "kind": "PyTorchJob", "workers": 2},
        )

    try:
        kubeconfig = emulator.write_kubeconfig(work / "kubeconfig")
        backend = KubernetesOrchestrator(settings=make_settings(work, kubeconfig))
        waiting = [job(f"wait-{i}", running=False) for i in range(4)]
        running = [job(f"run-{i}", running=True) for i in range(4)]
        emulator.put_many(
            "v1/events",
            [
                warning_event("default", f"wait-{i}.{n}", f"wait-{i}", "Pending", "PyTorchJob")
                for i in range(4)
                for n in range(2)
            ],
        )
        added = 0
        for load in loads:
            emulator.put_many(
                "v1/events",
                [
                    warning_event("default", f"other-{i}.1", f"other-{i}", "BackOff")
                    for i in range(added, load)
                ],
            )
            emulator.put_many(
                "v1/pods",
                [pod_object("others", f"other-{i}", None, 0) for i in range(4 * added, 4 * load)],
            )
            added = load

            # As in the server, whose tracker refreshes every few seconds: the watch cache has
            # caught up with the cluster before the refreshes are timed.
            def caught_up(load: int = load) -> bool:
                backend.refresh(waiting + running)  # (the first one starts the watches)
                cache = backend.watch_cache_status()
                warnings = cache.warning_events.get("default")
                synced = warnings is not None and warnings.synced and warnings.connected
                return cache.fresh and cache.pods.items >= 4 * load + 8 and synced

            try:
                wait_until(caught_up, 300, f"the watch cache with {load} other events")
            except RuntimeError:
                print(backend.cache_status(), flush=True)
                raise
            updates = backend.refresh(waiting + running)
            assert all(updates[j.id].state is JobState.RUNNING for j in running), updates
            assert all(
                any("Pending (wait-" in e for e in updates[j.id].events or []) for j in waiting
            ), updates
            for label, jobs in (("4 waiting", waiting), ("4 running", running)):
                wall, cpu = p50_ms(functools.partial(backend.refresh, jobs), rounds)
                columns.setdefault(f"{label} ms", []).append(wall)
                columns.setdefault(f"{label} CPU ms", []).append(cpu)
        backend.close()
    finally:
        emulator.stop()
        shutil.rmtree(work, ignore_errors=True)
    report(
        out,
        "kubernetes refresh",
        "other events",
        [float(load) for load in loads],
        columns,
    )


def follow(port: int, job_id: str, into: dict, ready: threading.Barrier) -> None:
    """One follower as the panel and the Python client follow: data in binary frames (a
    13-byte header, then the log's bytes), the other frames JSON text."""
    url = (
        f"ws://127.0.0.1:{port}/hyperpod/api/jobs/{job_id}/logs/stream"
        f"?token={TOKEN}&{FRAMES_QUERY}=binary"
    )
    ws = websocket.create_connection(url, timeout=300, skip_utf8_validation=True)
    ready.wait()
    lines, late, total = 0, [], None
    buffer = ""
    while True:
        message = ws.recv()
        if not message:
            break
        event = (  # decoded as the Python client decodes them
            LogEvent.from_binary(message)
            if isinstance(message, bytes)
            else LogEvent.from_frame(json.loads(message))
        )
        if event is not None and event.type == "end":
            break
        if event is None or event.type != "data":
            continue
        now = time.time()
        buffer += event.data
        *complete, buffer = buffer.split("\n")
        for text in complete:
            if text.startswith("line "):
                lines += 1
                late.append((now - float(text.split()[2])) * 1000)
            elif text.startswith("total "):
                total = int(text.split()[1])
    ws.close()
    into.update(lines=lines, latencies=late, total=total)


CLIENT_PROCESSES = 8


def followers(port: int, job_id: str, count: int, ready: Any, found: Any) -> None:
    """`count` followers in threads of this (forked) process; their results onto `found`."""
    results: list[dict] = [{} for _ in range(count)]
    connected = threading.Barrier(count + 1)
    threads = [
        threading.Thread(target=follow, args=(port, job_id, results[i], connected))
        for i in range(count)
    ]
    for thread in threads:
        thread.start()
    connected.wait()
    ready.wait()
    for thread in threads:
        thread.join()
    found.put(results)


def bench_followers(counts: list[int], rate: float, seconds: float, out: Path) -> None:
    columns: dict[str, list[float]] = {
        "lines/s each": [],
        "lost lines": [],
        "p99 latency ms": [],
        "server CPU %": [],
    }
    for count in counts:
        server = Server()
        try:
            job = server.call(
                "POST",
                "jobs",
                {"name": "writer", "command": ["writer.py", str(rate), str(seconds), "3"]},
            )
            wait_until(in_state(server, job["id"], "RUNNING"), 60, "the writer to start")
            # The followers in several processes: 200 threads of one process take turns at its
            # GIL (5 ms each), which would be the clients' latency, not the server's.
            processes = min(count, CLIENT_PROCESSES)
            context = multiprocessing.get_context("fork")
            ready = context.Barrier(processes + 1)
            found = context.Queue()
            shares = [count // processes + (i < count % processes) for i in range(processes)]
            clients = [
                context.Process(target=followers, args=(server.port, job["id"], n, ready, found))
                for n in shares
            ]
            for client in clients:
                client.start()
            ready.wait()
            cpu, wall = server.cpu_seconds(), time.monotonic()
            results: list[dict] = []
            for _ in clients:
                results += found.get(timeout=seconds + 120)
            for client in clients:
                client.join()
            used, elapsed = server.cpu_seconds() - cpu, time.monotonic() - wall
            totals = {r.get("total") for r in results}
            total = max(t for t in totals if t is not None) if totals - {None} else 0
            lost = sum(total - r.get("lines", 0) for r in results)
            every = [ms for r in results for ms in r.get("latencies", [])]
            columns["lines/s each"].append(
                sum(r.get("lines", 0) for r in results) / count / seconds
            )
            columns["lost lines"].append(float(lost))
            columns["p99 latency ms"].append(percentile(every, 0.99) if every else float("nan"))
            columns["server CPU %"].append(used / elapsed * 100)
        finally:
            server.stop()
    report(out, "log followers", "followers", [float(c) for c in counts], columns)


def sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=sizes, default=sizes("10,1000,10000,100000"))
    parser.add_argument("--running", type=sizes, default=sizes("1,16,64"))
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--followers", type=sizes, default=sizes("1,40,200"))
    parser.add_argument("--rate", type=float, default=500.0, help="lines/s the followed job prints")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "scale" / "out")
    parser.add_argument("--nodes", type=sizes, default=sizes("20,200,2000"))
    parser.add_argument("--events", type=sizes, default=sizes("100,1000,5000"))
    parser.add_argument("--only", default="history,running,followers,nodes,refresh")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    print(f"scale bench on {os.cpu_count()} CPUs, {args.seconds:.0f} s a point")
    if "history" in only:
        bench_history(args.history, args.seconds, args.out)
    if "running" in only:
        bench_running(args.running, args.ranks, args.seconds, args.out)
    if "followers" in only:
        bench_followers(args.followers, args.rate, args.seconds, args.out)
    if "nodes" in only:
        bench_nodes(args.nodes, 20, args.out)
    if "refresh" in only:
        bench_kubernetes_refresh(args.events, 20, args.out)


if __name__ == "__main__":
    main()
