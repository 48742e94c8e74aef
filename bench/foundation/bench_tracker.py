"""Readers under slow backend work: `GET jobs` during a slow status refresh, `GET cluster` while
8 cancels of TERM-ignoring jobs are in flight; the code before the tracker and the pools
(`--old-rev`), the code before the read path was made cheap (`--base-rev`) and this checkout
side by side, on real Jupyter servers on 127.0.0.1.

    python bench/foundation/bench_tracker.py [--old-rev 4f46528] [--base-rev e3b1d11]
        [--delay 2.0] [--seconds 8] [--history 100]

Each user has 5 running jobs and `--history` finished ones (rows copied in the store), so that a
page of `GET jobs` is 100 rows as after some weeks of use. Besides the HTTP latency (4 clients
with kept-alive connections, what the panels of 4 users see), the same call is timed in the
process (`service.jobs()` and its JSON, no HTTP): on a loaded machine the HTTP p99 is mostly
the scheduler's, and the in-process times show what the request path itself costs.

The slow refresh is injected into the real local backend by the server's Python config file
(`LocalOrchestrator.refresh` sleeps `--delay` seconds first): what a Kubernetes refresh draining
logs or an overloaded slurmctld does. The old code is this repository at `--old-rev`
(`git archive` into a temporary directory, run with the same interpreter).
Targets (issues 11 and 14): GET jobs p99 < 20 ms during the slow refresh; GET cluster p99 < 50 ms
while 8 cancels are in flight.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import free_port, percentile, summary

TOKEN = "bench-token"
REPO = Path(__file__).resolve().parents[2]

SLOW_CONFIG = """
import os, time
from jupyter_hyperpod.backends.local import LocalOrchestrator

_refresh = LocalOrchestrator.refresh
_delay = float(os.environ.get("BENCH_REFRESH_DELAY", "0"))


def slow_refresh(self, jobs):
    time.sleep(_delay)
    return _refresh(self, jobs)


LocalOrchestrator.refresh = slow_refresh
"""

SLEEPER = """import time
time.sleep(600)
"""

STUBBORN = """import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ignoring SIGTERM", flush=True)
time.sleep(600)
"""


class Server:
    """`jupyter server` with the extension, from the package at `source`."""

    def __init__(self, work: Path, source: Path, delay: float, parallel: int) -> None:
        self.port = free_port()
        self.fs = work / "fsx"
        (self.fs / "shared").mkdir(parents=True)
        (self.fs / "shared" / "stubborn.py").write_text(STUBBORN)
        (self.fs / "shared" / "sleeper.py").write_text(SLEEPER)
        config_dir = work / "config"
        config_dir.mkdir()
        (config_dir / "jupyter_server_config.py").write_text(SLOW_CONFIG)
        env = {
            **os.environ,
            "HYPERPOD_FS_ROOT": str(self.fs),
            "PYTHONPATH": str(source),
            "JUPYTER_CONFIG_DIR": str(config_dir),
            "BENCH_REFRESH_DELAY": str(delay),
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
                f"--ServerApp.root_dir={work}",
                "--HyperPodApp.orchestrator=local",
                "--HyperPodApp.refresh_interval=0.5",
                f"--HyperPodApp.local_max_parallel_jobs={parallel}",
                "--ServerApp.jpserver_extensions={'jupyter_hyperpod': True}",
                f"--HyperPodApp.job_store={work / 'jobs.sqlite'}",
                "--ServerApp.log_level=WARN",
            ],
            env=env,
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
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
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def latencies(server: Server, route: str, seconds: float, clients: int = 4) -> list[float]:
    """Each client calls `route` in a loop for `seconds`; every call's latency in ms."""
    found: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client() -> None:
        # One kept-alive connection per client, as a browser's: the latency is the server's.
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        headers = {"Authorization": f"token {TOKEN}"}
        mine = []
        while time.monotonic() < stop:
            started = time.perf_counter()
            connection.request("GET", f"/hyperpod/api/{route}", headers=headers)
            response = connection.getresponse()
            response.read()
            assert response.status == 200, response.status
            mine.append((time.perf_counter() - started) * 1000)
            time.sleep(0.01)
        connection.close()
        with lock:
            found.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return found


def add_history(store: Path, like: str, count: int) -> None:
    """`count` finished jobs, copies of the row of job `like` (whatever the columns of that
    version of the store), created over the last days."""
    with sqlite3.connect(store, timeout=30) as db:
        db.row_factory = sqlite3.Row
        row = dict(db.execute("SELECT * FROM jobs WHERE id = ?", (like,)).fetchone())
        now = time.time()
        for i in range(count):
            created = now - 86400 * 7 + i * 600
            copy = {
                **row,
                "id": f"old{i:04d}-{like[-6:]}",
                "name": f"old{i:04d}",
                "state": "SUCCEEDED",
                "state_reason": None,
                "created": created,
                "started": created + 1,
                "ended": created + 300,
                "exit_code": 0,
            }
            db.execute(
                f"INSERT INTO jobs ({', '.join(copy)}) VALUES ({', '.join('?' * len(copy))})",
                list(copy.values()),
            )


@contextmanager
def reads_server(source: Path, delay: float, history: int) -> Iterator[Server]:
    """A server whose status refresh takes `delay` s, with 5 running and `history` finished jobs."""
    with tempfile.TemporaryDirectory() as work:
        server = Server(Path(work), source, delay, parallel=5)
        jobs: list[dict] = []
        try:
            jobs = [
                server.call("POST", "jobs", {"name": f"long{i}", "command": ["sleeper.py"]})
                for i in range(5)
            ]
            add_history(Path(work) / "jobs.sqlite", jobs[0]["id"], history)
            time.sleep(1.0)
            yield server
        finally:
            for job in jobs:
                server.call("DELETE", f"jobs/{job['id']}")
            server.stop()


def bench_reads(
    cases: list[tuple[str, str, Path, float]], seconds: float, history: int, turn: float = 0.5
) -> list[tuple[str, str, list[float]]]:
    """GET jobs of every case's server (label, which, source, refresh delay), all running at
    once and measured in turns of `turn` s, so that load on the machine hits every case alike."""
    with ExitStack() as stack:
        servers = [stack.enter_context(reads_server(c[2], c[3], history)) for c in cases]
        found: list[list[float]] = [[] for _ in cases]
        for _ in range(max(1, round(seconds / turn))):
            for server, into in zip(servers, found, strict=True):
                into += latencies(server, "jobs", turn)
    return [(c[0], c[1], values) for c, values in zip(cases, found, strict=True)]


INPROCESS = """
import json, sys, time
from pathlib import Path

sys.path.insert(0, sys.argv[4])
import bench_tracker

exec(bench_tracker.SLOW_CONFIG)
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings

work, seconds, history = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
fs = work / "fsx"
(fs / "shared").mkdir(parents=True)
(fs / "shared" / "sleeper.py").write_text(bench_tracker.SLEEPER)
settings = HyperPodSettings(
    shared_fs_root=str(fs),
    orchestrator="local",
    job_store=str(work / "jobs.sqlite"),
    refresh_interval=0.5,
    local_max_parallel_jobs=5,
)
service = HyperPodService(settings)
jobs = [service.submit({"name": f"long{i}", "command": ["sleeper.py"]}) for i in range(5)]
bench_tracker.add_history(work / "jobs.sqlite", jobs[0].id, history)
time.sleep(1.0)
tracker = getattr(service, "tracker", None)  # the code before the tracker has none
if tracker is not None:
    tracker.wait_first(60)  # a process that has just started waits once for its first look
service.jobs()
found = []
stop = time.monotonic() + seconds
while time.monotonic() < stop:
    started = time.perf_counter()
    service.jobs().model_dump_json()
    found.append((time.perf_counter() - started) * 1000)
    time.sleep(0.005)
for job in jobs:
    service.cancel(job.id)
getattr(service, "close", lambda: None)()
print(json.dumps(found))
"""


def bench_inprocess(source: Path, delay: float, seconds: float, history: int) -> list[float]:
    """`service.jobs()` and its JSON in the process, one caller, no HTTP (same jobs, same
    injected refresh delay): what the request path costs without the machine's scheduling."""
    with tempfile.TemporaryDirectory() as work:
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                INPROCESS,
                work,
                str(seconds),
                str(history),
                str(Path(__file__).resolve().parent),
            ],
            env={**os.environ, "PYTHONPATH": str(source), "BENCH_REFRESH_DELAY": str(delay)},
            cwd=work,
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def bench_cancels(source: Path, seconds: float) -> tuple[list[float], float]:
    """GET cluster while 8 cancels of TERM-ignoring jobs are in flight (each waits ~10 s)."""
    with tempfile.TemporaryDirectory() as work:
        server = Server(Path(work), source, 0.0, parallel=8)
        try:
            jobs = [
                server.call("POST", "jobs", {"name": f"stubborn{i}", "command": ["stubborn.py"]})
                for i in range(8)
            ]
            deadline = time.monotonic() + 30
            while any(server.call("GET", f"jobs/{j['id']}")["state"] != "RUNNING" for j in jobs):
                assert time.monotonic() < deadline, "the jobs did not start"
                time.sleep(0.2)
            time.sleep(0.5)
            started = time.monotonic()
            cancels = [
                threading.Thread(target=server.call, args=("DELETE", f"jobs/{job['id']}"))
                for job in jobs
            ]
            for thread in cancels:
                thread.start()
            time.sleep(0.3)
            found = latencies(server, "cluster", seconds)
            for thread in cancels:
                thread.join()
            return found, time.monotonic() - started
        finally:
            server.stop()


def old_source(rev: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "jupyter_hyperpod"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-rev", default="4f46528", help="the code before the tracker")
    parser.add_argument("--base-rev", default="e3b1d11", help="the code before the cheap read path")
    parser.add_argument("--delay", type=float, default=2.0, help="injected refresh delay (s)")
    parser.add_argument("--seconds", type=float, default=8.0, help="measuring time per case")
    parser.add_argument("--history", type=int, default=100, help="finished jobs of the user")
    args = parser.parse_args()
    seconds, delay, history = args.seconds, args.delay, args.history
    with tempfile.TemporaryDirectory() as old_dir, tempfile.TemporaryDirectory() as base_dir:
        old = old_source(args.old_rev, Path(old_dir))
        base = old_source(args.base_rev, Path(base_dir))
        sources = (("old", old), ("base", base), ("new", REPO))
        cases = [("refresh 0 s", "new", REPO, 0.0)]
        cases += [(f"refresh {delay:g} s", which, source, delay) for which, source in sources]
        reads = bench_reads(cases, seconds, history)
        inside = [("refresh 0 s", "new", bench_inprocess(REPO, 0.0, seconds, history))]
        inside += [
            (f"refresh {delay:g} s", which, bench_inprocess(source, delay, seconds, history))
            for which, source in sources
        ]
        old_cancel, old_took = bench_cancels(old, seconds)
        new_cancel, new_took = bench_cancels(REPO, seconds)
    print(
        f"\nold = {args.old_rev} (before the tracker), base = {args.base_rev} (before the cheap "
        f"read path), new = this checkout\n5 running and {history} finished jobs, a page of "
        f"{min(100, history + 5)}; {seconds:g} s per case\n"
    )
    print("GET jobs over HTTP, 4 clients (the 4 servers run at once, measured in turns):")
    for label, which, values in reads:
        print(f"  {label:12s} {which:4s}  {summary(values)}")
    print("service.jobs() + JSON in the process, 1 caller (no HTTP, no scheduler between):")
    for label, which, values in inside:
        print(f"  {label:12s} {which:4s}  {summary(values)}")
    print("GET cluster over HTTP, 4 clients, while 8 cancels of TERM-ignoring jobs run:")
    for which, values, took in (("old", old_cancel, old_took), ("new", new_cancel, new_took)):
        print(f"  cancels {took:3.0f} s {which:4s}  {summary(values)}")
    new_reads, new_inside = reads[-1][2], inside[-1][2]
    base_inside = inside[-2][2]
    print(
        f"\ntargets: GET jobs p99 during a slow refresh {percentile(new_reads, 0.99):.1f} ms "
        f"(< 20); in the process p99 {percentile(new_inside, 0.99):.2f} ms "
        f"(base {percentile(base_inside, 0.99):.2f} ms, "
        f"{percentile(base_inside, 0.99) / percentile(new_inside, 0.99):.1f}x); "
        f"GET cluster p99 with 8 cancels {percentile(new_cancel, 0.99):.1f} ms (< 50)"
    )


if __name__ == "__main__":
    main()
