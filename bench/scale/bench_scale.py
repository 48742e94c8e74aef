"""How the cost grows with the work: a real Jupyter server with the extension on 127.0.0.1 (the
local backend), each series at growing sizes, each ending with the exponent k of a power-law fit
(cost ~ work^k: 1 is linear, above 1 a path that grows faster than the work) and a PNG plot.

    python bench/scale/bench_scale.py [--history 10,1000,10000,100000] [--running 1,16,64]
        [--ranks 8] [--followers 1,40,200] [--rate 500] [--seconds 6] [--out bench/scale/out]
        [--only history,running,followers]

1. Job history (finished rows in the job store): GET jobs, a page of 100, and the same filtered
   by state, p50/p99 over kept-alive connections; the server's RSS. Goal: p99 < 20 ms at 100,000.
2. Running jobs x ranks (`sleep` processes on the local backend): the server's CPU time per
   status refresh of the tracker (its refresh counter and its process CPU), and per rank.
   Goal: linear in the ranks, < 1 ms per rank.
3. Followers of one job that prints `--rate` lines/s: lines each follower received (none may be
   lost), write-to-client latency p99, the server's CPU. Goal: 200 followers, p99 < 100 ms.
Prints figures only; nothing is asserted (the machine is shared: compare the exponents).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
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

import psutil
import websocket  # websocket-client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import free_port, percentile

TOKEN = "bench-token"
REPO = Path(__file__).resolve().parents[2]
SLEEPER = "import time\ntime.sleep(3600)\n"
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


def bench_running(counts: list[int], ranks: int, seconds: float, out: Path) -> None:
    server = Server(parallel=max(counts), refresh=0.5)
    columns: dict[str, list[float]] = {"CPU ms/refresh": [], "CPU ms/rank": []}
    try:
        running: list[str] = []
        for count in counts:
            while len(running) < count:
                job = server.call(
                    "POST",
                    "jobs",
                    {
                        "name": f"run{len(running)}",
                        "command": ["/bin/sleep", "3600"],
                        "procs_per_node": ranks,
                        "launcher": "plain",
                    },
                )
                running.append(job["id"])
            wait_until(running_at_least(server, count), 120, f"{count} running jobs")
            time.sleep(1.0)  # settle: the first refreshes after a submit read more
            cpu, wall = server.cpu_seconds(), time.monotonic()
            time.sleep(seconds)
            used, elapsed = server.cpu_seconds() - cpu, time.monotonic() - wall
            refreshes = elapsed / 0.5  # the tracker refreshes every refresh_interval
            per_refresh = used / refreshes * 1000
            columns["CPU ms/refresh"].append(per_refresh)
            columns["CPU ms/rank"].append(per_refresh / (count * ranks))
        report(out, "running jobs tracker", "ranks", [float(c * ranks) for c in counts], columns)
    finally:
        for job_id in running:
            with contextlib.suppress(OSError):
                server.call("DELETE", f"jobs/{job_id}")
        server.stop()


def follow(port: int, job_id: str, into: dict, ready: threading.Barrier) -> None:
    url = f"ws://127.0.0.1:{port}/hyperpod/api/jobs/{job_id}/logs/stream?token={TOKEN}"
    ws = websocket.create_connection(url, timeout=300, skip_utf8_validation=True)
    ready.wait()
    lines, late, total = 0, [], None
    buffer = ""
    while True:
        message = ws.recv()
        if not message:
            break
        frame = json.loads(message)
        if frame["type"] == "end":
            break
        if frame["type"] != "data":
            continue
        now = time.time()
        buffer += frame["data"]
        *complete, buffer = buffer.split("\n")
        for text in complete:
            if text.startswith("line "):
                lines += 1
                late.append((now - float(text.split()[2])) * 1000)
            elif text.startswith("total "):
                total = int(text.split()[1])
    ws.close()
    into.update(lines=lines, latencies=late, total=total)


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
            results: list[dict] = [{} for _ in range(count)]
            ready = threading.Barrier(count + 1)
            threads = [
                threading.Thread(target=follow, args=(server.port, job["id"], results[i], ready))
                for i in range(count)
            ]
            for thread in threads:
                thread.start()
            ready.wait()
            cpu, wall = server.cpu_seconds(), time.monotonic()
            for thread in threads:
                thread.join()
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
    parser.add_argument("--only", default="history,running,followers")
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


if __name__ == "__main__":
    main()
