"""Readers under slow backend work: `GET jobs` during a slow status refresh, `GET cluster` while
8 cancels of TERM-ignoring jobs are in flight; the code before the tracker and the pools
(`--old-rev`) side by side with this checkout, on real Jupyter servers on 127.0.0.1.

    python bench/foundation/bench_tracker.py [--old-rev 4f46528] [--delay 2.0] [--seconds 8]

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
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: list[float]) -> str:
    return (
        f"n={len(values):5d}  p50={statistics.median(values):8.1f} ms  "
        f"p99={p(values, 0.99):8.1f} ms  max={max(values):8.1f} ms"
    )


def bench_reads(source: Path, delay: float, seconds: float) -> list[float]:
    """GET jobs while the backend's status refresh takes `delay` s (5 unfinished jobs)."""
    with tempfile.TemporaryDirectory() as work:
        server = Server(Path(work), source, delay, parallel=5)
        try:
            jobs = [
                server.call("POST", "jobs", {"name": f"long{i}", "command": ["sleeper.py"]})
                for i in range(5)
            ]
            time.sleep(1.0)
            return latencies(server, "jobs", seconds)
        finally:
            for job in jobs:
                server.call("DELETE", f"jobs/{job['id']}")
            server.stop()


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
    parser.add_argument("--delay", type=float, default=2.0, help="injected refresh delay (s)")
    parser.add_argument("--seconds", type=float, default=8.0, help="measuring time per case")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as old_dir:
        old = old_source(args.old_rev, Path(old_dir))
        rows = [
            ("GET jobs, refresh 0 s (baseline)", "new", bench_reads(REPO, 0.0, args.seconds)),
            (
                f"GET jobs, refresh {args.delay:g} s",
                "old",
                bench_reads(old, args.delay, args.seconds),
            ),
            (
                f"GET jobs, refresh {args.delay:g} s",
                "new",
                bench_reads(REPO, args.delay, args.seconds),
            ),
        ]
        old_cancel, old_took = bench_cancels(old, args.seconds)
        new_cancel, new_took = bench_cancels(REPO, args.seconds)
    rows += [
        (f"GET cluster, 8 cancels ({old_took:.0f} s)", "old", old_cancel),
        (f"GET cluster, 8 cancels ({new_took:.0f} s)", "new", new_cancel),
    ]
    print(f"\nold = {args.old_rev}, new = this checkout; 4 clients each, {args.seconds:g} s\n")
    for label, which, values in rows:
        print(f"{label:34s} {which:3s}  {summary(values)}")
    new_reads = rows[2][2]
    print(
        f"\ntargets: GET jobs p99 during a slow refresh {p(new_reads, 0.99):.1f} ms (< 20), "
        f"GET cluster p99 with 8 cancels {p(new_cancel, 0.99):.1f} ms (< 50)"
    )


if __name__ == "__main__":
    main()
