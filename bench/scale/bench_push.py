"""Pushed vs polled (#25 item 1): what 10 panels cost the server, with the job feed and without.

    python bench/scale/bench_push.py [--seconds 60] [--clients 10] [--history 1000]
        [--running 20] [--views 2] [--poll 10]

A real Jupyter server with the extension (local backend, refresh_interval 2 s) holds `--history`
jobs, `--running` of them running and printing a step line every 0.2 s (their progress and step
clocks change at every refresh of the tracker). `--clients` panels then watch the Jobs list for
`--seconds`, once as each mode, in turns on the same server:

- polled (the panel before the feed, and its fallback): every `--poll` s the list's page
  (`GET jobs?limit=50`), the watch of unfinished jobs (`GET jobs/{id}` for each, at most 20) and
  each of `--views` job views open per panel (`GET jobs/{id}`), every panel at its own phase;
- pushed: one WebSocket `GET feed` per panel (connected before the window), plus the same list
  and watch polls 6 times less often (src/jobsmodel.ts `PUSHED_SLOWER`: the safety net); the
  views do not poll.

Printed side by side, per minute: the server's CPU seconds (its process: the tracker's refreshes
included), the bytes it sent to the panels (counted by the clients: HTTP status line, headers and
body; WebSocket frames with their headers), requests and frames, and how old the progress a panel
shows is (its step against the step the job prints now, sampled every second: what staleness
each mode buys). Figures only; nothing is asserted (the machine is shared: run it twice).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import re
import socket
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import websocket  # websocket-client
from bench_scale import TOKEN, Server, grow_history, in_state, running_at_least, wait_until

STEP_SECONDS = 0.2
CLOCKED = (
    "import sys, time\n"
    "# bench_scale.STEPPER's step lines on a fixed schedule: step n at t0 + n * 0.2 s (no drift),\n"
    "# t0 written to the file argv[1] names, so that the bench knows when each step was printed.\n"
    "t0 = time.time()\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    out.write(repr(t0))\n"
    "for step in range(1, 100000):\n"
    "    time.sleep(max(0.0, t0 + step * 0.2 - time.time()))\n"
    "    print(f'step {step}/100000 loss 0.{step % 997:03d} lr 2.0e-04 tokens/s 12345.6', flush=True)\n"
)
PAGE = 50
"""The Jobs list's page (src/jobsmodel.ts `jobsPageSize`)."""
WATCHED = 20
"""The watch checks at most this many unfinished jobs (src/jobwatch.ts `check`)."""
PUSHED_SLOWER = 6


@dataclass
class Seen:
    """What one panel received, and the progress it shows (job id -> step)."""

    received: int = 0
    requests: int = 0
    frames: int = 0
    steps: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def show(self, job: dict) -> None:
        progress = job.get("progress") or {}
        if job.get("state") == "RUNNING" and "step" in progress:
            with self.lock:
                self.steps[job["id"]] = int(progress["step"])


class Http:
    """A kept-alive HTTP/1.1 connection that counts every byte the server sends on it."""

    def __init__(self, port: int, seen: Seen) -> None:
        self.port = port
        self.seen = seen
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buffer = b""

    def get(self, route: str) -> dict:
        request = (
            f"GET /hyperpod/api/{route} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Authorization: token {TOKEN}\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        assert match, head  # Tornado answers with a length (no chunks, no compression)
        length = int(match.group(1))
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        assert status == 200, (status, body[:200])
        with self.seen.lock:
            self.seen.received += len(head) + 4 + length
            self.seen.requests += 1
        return json.loads(body)  # type: ignore[no-any-return]

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        self.sock.close()


def frame_bytes(payload: int) -> int:
    """An unmasked server frame's size on the wire (RFC 6455 5.2; no extension negotiated)."""
    return payload + 2 + (2 if 126 <= payload < 65536 else 8 if payload >= 65536 else 0)


class Panel:
    """One user's panel: the list's and the watch's polls, its job views' polls, or the feed."""

    def __init__(self, port: int, running: list[str], views: list[str], poll: float) -> None:
        self.port = port
        self.running = running
        self.views = views
        self.poll = poll
        self.seen = Seen()
        self.http = Http(port, self.seen)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.socket: websocket.WebSocket | None = None

    def poll_once(self, views: bool) -> None:
        listed = self.http.get(f"jobs?limit={PAGE}")
        for job in listed["jobs"]:
            self.seen.show(job)
        unfinished = [j["id"] for j in listed["jobs"] if j["state"] in ("PENDING", "RUNNING")]
        for job_id in unfinished[:WATCHED]:
            self.seen.show(self.http.get(f"jobs/{job_id}"))
        for job_id in self.views if views else []:
            self.seen.show(self.http.get(f"jobs/{job_id}"))

    def start(self, pushed: bool, window: float) -> None:
        """Connect (pushed: the feed and its first fetch, before the window), then run."""
        interval = self.poll * (PUSHED_SLOWER if pushed else 1)
        if pushed:
            url = f"ws://127.0.0.1:{self.port}/hyperpod/api/feed?token={TOKEN}"
            self.socket = websocket.create_connection(url, timeout=60)
            hello = json.loads(self.socket.recv())
            assert hello["type"] == "hello", hello
            self.poll_once(views=False)  # the refetch on hello
            self.threads.append(threading.Thread(target=self._follow, daemon=True))
        # Each panel at its own phase; a pushed panel's safety poll may fall outside the window.
        phase = random.uniform(0, interval)
        self.threads.append(
            threading.Thread(target=self._polls, args=(interval, phase, not pushed), daemon=True)
        )

    def run(self) -> None:
        for thread in self.threads:
            thread.start()

    def _polls(self, interval: float, phase: float, views: bool) -> None:
        if self.stop.wait(phase):
            return
        while True:
            self.poll_once(views)
            if self.stop.wait(interval):
                return

    def _follow(self) -> None:
        assert self.socket is not None
        self.socket.settimeout(1.0)
        while not self.stop.is_set():
            try:
                text = self.socket.recv()
            except websocket.WebSocketTimeoutException:
                continue
            except (websocket.WebSocketConnectionClosedException, OSError):
                return
            with self.seen.lock:
                raw = text.encode() if isinstance(text, str) else text
                self.seen.received += frame_bytes(len(raw))
                self.seen.frames += 1
            event = json.loads(text)
            if event["type"] == "job":
                self.seen.show(event["job"])

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)
        if self.socket is not None:
            self.socket.close()
        self.http.close()


def staleness(panels: list[Panel], started: dict[str, float]) -> float:
    """Seconds behind the job, the mean over panels and running jobs: how long ago the job
    printed the step a panel shows (`started`: each job's t0)."""
    now = time.time()
    behind = []
    for panel in panels:
        with panel.seen.lock:
            steps = dict(panel.seen.steps)
        for job_id, start in started.items():
            if job_id in steps:
                behind.append(max(0.0, (now - start) - steps[job_id] * STEP_SECONDS))
    return statistics.mean(behind) if behind else float("nan")


@dataclass
class Result:
    cpu: float
    sent: int
    requests: int
    frames: int
    behind: float
    behind_p90: float
    seconds: float

    def per_minute(self, value: float) -> float:
        return value * 60 / self.seconds


def measure(
    server: Server,
    pushed: bool,
    args: argparse.Namespace,
    running: list[str],
    started: dict[str, float],
) -> Result:
    views_of = [
        [running[(i * args.views + v) % len(running)] for v in range(args.views)]
        for i in range(args.clients)
    ]
    panels = [Panel(server.port, running, views_of[i], args.poll) for i in range(args.clients)]
    for panel in panels:
        panel.start(pushed, args.seconds)
    for panel in panels:
        panel.seen.received = panel.seen.requests = panel.seen.frames = 0
    cpu, wall = server.cpu_seconds(), time.monotonic()
    for panel in panels:
        panel.run()
    samples = []
    while (elapsed := time.monotonic() - wall) < args.seconds:
        time.sleep(min(1.0, args.seconds - elapsed))
        samples.append(staleness(panels, started))
    used, elapsed = server.cpu_seconds() - cpu, time.monotonic() - wall
    for panel in panels:
        panel.stop.set()
    result = Result(
        cpu=used,
        sent=sum(p.seen.received for p in panels),
        requests=sum(p.seen.requests for p in panels),
        frames=sum(p.seen.frames for p in panels),
        behind=statistics.mean(s for s in samples if s == s),
        behind_p90=sorted(s for s in samples if s == s)[int(0.9 * (len(samples) - 1))],
        seconds=elapsed,
    )
    for panel in panels:
        panel.close()
    return result


def written(path: Path) -> bool:
    return path.is_file() and bool(path.read_text())


def setup(server: Server, history: int, count: int) -> tuple[list[str], dict[str, float]]:
    """`history` jobs in the store, the newest `count` of them running the clocked stepper;
    their ids and t0s."""
    seed = server.call("POST", "jobs", {"name": "seed", "command": ["sleeper.py"]})
    server.call("DELETE", f"jobs/{seed['id']}")
    wait_until(in_state(server, seed["id"], "CANCELLED"), 60, "the cancel")
    grow_history(server.store, seed["id"], history - count)
    shared = server.fs / "shared"
    (shared / "clocked.py").write_text(CLOCKED)
    ids = []
    for i in range(count):
        t0 = shared / f"t0-{i:02d}"
        body = {"name": f"step{i:02d}", "command": ["clocked.py", str(t0)], "launcher": "plain"}
        ids.append(server.call("POST", "jobs", body)["id"])
    wait_until(running_at_least(server, count), 120, f"{count} running jobs")
    started = {}
    for i, job_id in enumerate(ids):
        t0 = shared / f"t0-{i:02d}"
        wait_until(functools.partial(written, t0), 60, f"{t0.name}")
        started[job_id] = float(t0.read_text())
    total = server.call("GET", "jobs?limit=1")["total"]
    assert total == history, (total, history)
    return ids, started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="each mode's window")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--history", type=int, default=1000, help="jobs in the store in all")
    parser.add_argument("--running", type=int, default=20)
    parser.add_argument("--views", type=int, default=2, help="job views open in each panel")
    parser.add_argument("--poll", type=float, default=10.0, help="the panel's refreshInterval")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds before each window")
    args = parser.parse_args()
    print(
        f"push bench on {os.cpu_count()} CPUs: {args.history:,} jobs, {args.running} running, "
        f"{args.clients} panels ({args.views} job views each), {args.seconds:.0f} s a mode, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    server = Server(parallel=args.running, refresh=2.0)
    running: list[str] = []
    try:
        ids, started = setup(server, args.history, args.running)
        running.extend(ids)
        results: dict[str, Result] = {}
        for mode in ("polled", "pushed"):
            time.sleep(args.settle)  # the last mode's clients gone, the tracker back to its pace
            results[mode] = measure(server, mode == "pushed", args, running, started)
        polled, pushed = results["polled"], results["pushed"]
        rows: list[tuple[str, Callable[[Result], float], str]] = [
            ("server CPU s/min", lambda r: r.per_minute(r.cpu), "{:12.2f}"),
            ("bytes sent/min", lambda r: r.per_minute(r.sent), "{:12,.0f}"),
            ("HTTP requests/min", lambda r: r.per_minute(r.requests), "{:12,.0f}"),
            ("feed frames/min", lambda r: r.per_minute(r.frames), "{:12,.0f}"),
            ("progress behind s", lambda r: r.behind, "{:12.1f}"),
            ("  p90 of samples", lambda r: r.behind_p90, "{:12.1f}"),
        ]
        print(f"\n  {'per minute':<20} {'polled':>12} {'pushed':>12} {'pushed/polled':>14}")
        for label, value, form in rows:
            a, b = value(polled), value(pushed)
            ratio = f"{b / a:14.2f}" if a else f"{'':>14}"
            print(f"  {label:<20} {form.format(a)} {form.format(b)} {ratio}")
        print(f"  (load after: {os.getloadavg()[0]:.1f})")
    finally:
        for job_id in running:
            with contextlib.suppress(OSError):
                server.call("DELETE", f"jobs/{job_id}")
        server.stop()


if __name__ == "__main__":
    main()
