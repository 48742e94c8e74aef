"""Foundation benchmarks, side by side in one run against a real Jupyter server on 127.0.0.1.

    python bench/foundation/bench_api.py [--entries 100000] [--log-gb 1.0] [--follow-lines 2000000]
        [--latency-samples 300] [--only listing,tail,follow]

1. Listing a directory of N entries: our API (first page, cold; another page right after a change
   and in the steady state, the 2-second rule's cache) vs os.scandir + stat vs jupyter-server's
   own /api/contents.
2. The last 1,000 lines of a large log through the API.
3. Following a log over the WebSocket: a backlog's lines/s vs reading the file directly, and the
   write-to-client latency of live lines (p99, max).
Targets: listing <= 1.5x scandir+stat, tail < 50 ms (issue 2); follow >= 25% of the direct read,
latency p99 < 25 ms and max < 50 ms (issue 27). Each is printed as a ratio at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import websocket  # websocket-client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from common import free_port, median, percentile, timed

from jupyter_hyperpod.core.logprotocol import BINARY_HEADER
from jupyter_hyperpod.core.wsreader import OPCODE_BINARY, OPCODE_CLOSE, FrameReader

TOKEN = "bench-token"


class Server:
    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.fs = work / "fsx"
        (self.fs / "shared").mkdir(parents=True)
        repo = str(Path(__file__).resolve().parents[2])
        env = {
            **os.environ,
            "HYPERPOD_FS_ROOT": str(self.fs),
            "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])),
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
                "--ServerApp.jpserver_extensions={'jupyter_hyperpod': True}",
                f"--HyperPodApp.job_store={work / 'jobs.sqlite'}",
                "--ServerApp.log_level=WARN",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.get("hyperpod/api/cluster")
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def get(self, path: str) -> bytes:
        request = urllib.request.Request(
            self.url + path, headers={"Authorization": f"token {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.read()  # type: ignore[no-any-return]

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def drop_caches_hint() -> None:
    os.sync()


def bench_listing(server: Server, entries: int) -> list[tuple[str, float]]:
    directory = server.fs / "shared" / "many"
    directory.mkdir()
    for i in range(entries):
        (directory / f"file-{i:06}.txt").touch()

    def scandir_stat() -> None:
        with os.scandir(directory) as iterator:
            rows = [(e.name, e.stat(follow_symlinks=False)) for e in iterator]
        rows.sort(key=lambda row: row[0])

    raw = timed(scandir_stat, 3)
    # A new file invalidates our cached scan: each timed API call is a cold scan + sort + one page.
    counter = iter(range(10**9))

    def api_cold() -> None:
        (directory / f"new-{next(counter)}").touch()
        server.get("hyperpod/api/files?path=many&limit=500")

    cold = timed(api_cold, 3)
    # Right after a change the scan is used once (a directory changed within the 2-second
    # timestamp tick of Lustre may change again unseen: partition.COARSE_MTIME_SECONDS); the
    # steady state, once the directory has been still that long, is the cached scan.
    just_changed = timed(
        lambda: server.get("hyperpod/api/files?path=many&offset=50000&limit=500"), 3
    )
    time.sleep(2.5)
    server.get("hyperpod/api/files?path=many&limit=500")
    steady = timed(lambda: server.get("hyperpod/api/files?path=many&offset=50000&limit=500"), 5)
    contents = timed(
        lambda: server.get(f"api/contents/{directory.relative_to(server.fs.parent)}?content=1"), 1
    )
    return [
        (f"os.scandir + stat + sort, {entries:,} entries", raw),
        ("API first page (cold: scan + stat + sort)", cold),
        ("API another page (directory changed < 2 s ago)", just_changed),
        ("API another page (directory unchanged, steady)", steady),
        ("jupyter-server /api/contents (whole listing)", contents),
    ]


def write_big_log(path: Path, gigabytes: float) -> int:
    line = b"step 123456 loss 0.123456 lr 2.0e-04 tokens/s 12345.6 " + b"x" * 40 + b"\n"
    block = line * 10000
    target = int(gigabytes * 1024**3)
    written = 0
    with open(path, "wb") as handle:
        while written < target:
            handle.write(block)
            written += len(block)
    return written


def bench_tail(server: Server, gigabytes: float) -> list[tuple[str, float]]:
    script = server.fs / "shared" / "sleeper.py"
    script.write_text("import time\ntime.sleep(3600)\n")
    job = server.post("hyperpod/api/jobs", {"name": "bigtail", "command": ["sleeper.py"]})
    log = server.fs / "shared" / ".hyperpod" / "jobs" / job["id"] / "rank-0.log"
    deadline = time.monotonic() + 30
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    size = write_big_log(log, gigabytes)
    path = f"hyperpod/api/jobs/{job['id']}/logs?tail=1000"
    body = json.loads(server.get(path))
    assert body["text"].count("\n") == 1000, "tail returned the wrong number of lines"
    elapsed = timed(lambda: server.get(path), 5)
    request = urllib.request.Request(
        server.url + f"hyperpod/api/jobs/{job['id']}",
        method="DELETE",
        headers={"Authorization": f"token {TOKEN}"},
    )
    urllib.request.urlopen(request, timeout=60).read()
    return [(f"API tail=1000 of a {size / 1024**3:.2f} GB log", elapsed)]


THROUGHPUT_LINE = "line {:09d} of the throughput phase\n"


def bench_follow(
    server: Server, lines: int, samples: int, frames: str = "binary"
) -> tuple[list[tuple[str, float]], dict]:
    """A backlog of `lines` lines delivered over the WebSocket vs read from the file, then
    `samples` timestamped lines written live (every 10 ms) for the write-to-client latency.
    `frames=binary` (the default): data frames as a header and the log's bytes; `text`: JSON.

    The client counts lines as the direct reader does (in C: `str.count`), so that the figure is
    the server's, not a Python loop's over each line."""
    script = server.fs / "shared" / "writer.py"
    script.write_text(
        "import sys, time\n"
        "n, samples = int(sys.argv[1]), int(sys.argv[2])\n"
        "out = sys.stdout\n"
        f"chunk = ''.join({THROUGHPUT_LINE!r}.format(i) for i in range(1000))\n"
        "for _ in range(n // 1000):\n"
        "    out.write(chunk)\n"
        "out.flush()\n"
        "time.sleep(4)  # the bench connects once the backlog is written\n"
        "for i in range(samples):\n"
        "    out.write(f'latency {time.time():.6f}\\n'); out.flush(); time.sleep(0.01)\n"
    )
    lines -= lines % 1000
    job = server.post(
        "hyperpod/api/jobs", {"name": "follow", "command": ["writer.py", str(lines), str(samples)]}
    )
    log = server.fs / "shared" / ".hyperpod" / "jobs" / job["id"] / "rank-0.log"
    backlog = lines * len(THROUGHPUT_LINE.format(0))
    deadline = time.monotonic() + 60
    while (not log.exists() or log.stat().st_size < backlog) and time.monotonic() < deadline:
        time.sleep(0.02)
    url = (
        f"ws://127.0.0.1:{server.port}/hyperpod/api/jobs/{job['id']}/logs/stream?token={TOKEN}"
        f"&frames={frames}"
    )
    start = time.perf_counter()
    ws = websocket.create_connection(url, timeout=120, skip_utf8_validation=True)
    assert ws.sock is not None
    reader = FrameReader(ws.sock, ws.pong)  # the Python client's reads (large, not 16 KiB)
    received = 0
    last = None
    latencies = []
    while True:
        got = reader.read()
        if got is None or got[0] == OPCODE_CLOSE:
            break
        message: bytes | str = got[1] if got[0] == OPCODE_BINARY else got[1].decode()
        start_at = 0
        if isinstance(message, bytes):  # frames=binary: a data frame's header and its bytes
            data, start_at = message, BINARY_HEADER.size
        else:
            frame = json.loads(message)
            if frame["type"] == "end":
                break
            if frame["type"] != "data":
                continue
            data = frame["data"].encode()
        if received >= lines:  # the backlog is in: what follows are the timestamped lines
            now = time.time()
            latencies += [
                now - float(text.split()[1])
                for text in data[start_at:].splitlines()
                if text.startswith(b"latency ")
            ]
            continue
        received += data.count(b"\n", start_at)  # as the direct reader counts them
        if received >= lines and last is None:
            last = time.perf_counter()
    ws.close()

    def read_file_directly() -> None:
        count, offset = 0, 0
        with open(log, "rb") as handle:
            while count < lines:
                handle.seek(offset)
                data = handle.read(1024 * 1024)
                count += data.count(b"\n")
                offset += len(data)

    direct = timed(read_file_directly, 5)
    server_side = timed(lambda: frame_in_process(log, lines, frames), 3)
    api_seconds = (last or time.perf_counter()) - start
    rows = [
        (
            f"API WebSocket follow (connect to last line): {lines:,} lines -> "
            f"{lines / api_seconds:,.0f} lines/s",
            api_seconds,
        ),
        (f"Reading the file directly: {lines / direct:,.0f} lines/s", direct),
        (
            f"The server's side in process (read + frames, {frames}): {lines / server_side:,.0f} "
            "lines/s",
            server_side,
        ),
    ]
    figures = {
        "api": lines / api_seconds,
        "direct": lines / direct,
        "server": lines / server_side,
        "latencies": latencies,
    }
    if latencies:
        rows.append(
            (
                f"API write-to-client latency, median of {len(latencies)} (p99 "
                f"{percentile(latencies, 0.99) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms)",
                median(latencies),
            )
        )
    return rows, figures


def frame_in_process(log: Path, lines: int, frames: str = "binary") -> None:
    """What the server does for a follower of this backlog, without the network or a client:
    the follow loop's reads and each frame's bytes (binary, or JSON text), as the handler sends
    them."""
    from jupyter_hyperpod.core.backend import FileLogReader
    from jupyter_hyperpod.core.logprotocol import Follow
    from jupyter_hyperpod.core.models import JobState

    class Running:
        state, state_reason, exit_code = JobState.RUNNING, None, None

    class Source:
        def job(self, job_id: str) -> Running:
            return Running()

        def log_reader(self, job_id: str, rank: int = 0) -> FileLogReader:
            return FileLogReader(log)

    follow = Follow(Source(), "bench", {0: 0})
    follow.open()
    sent = 0
    try:
        while sent < lines:
            for event in follow.step().events:
                if event.type == "data":
                    frame = event.to_binary() if frames == "binary" else event.to_json()
                    sent += event.data.count("\n") if frame else 0
    finally:
        follow.close()


def poll_latency(path: Path) -> float:
    """Latency of a reader polling the file every 1 ms (the floor our 20-100 ms idle backoff is near)."""
    samples = []
    stop = threading.Event()
    with open(path, "ab") as writer, open(path, "rb") as reader:
        reader.seek(0, 2)
        for _ in range(20):
            stamp = time.time()
            writer.write(f"latency {stamp:.6f}\n".encode())
            writer.flush()
            while not stop.is_set():
                data = reader.read()
                if data:
                    samples.append(time.time() - stamp)
                    break
                time.sleep(0.001)
    return median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--log-gb", type=float, default=1.0)
    parser.add_argument("--follow-lines", type=int, default=2_000_000)
    parser.add_argument("--latency-samples", type=int, default=300)
    parser.add_argument("--only", default="listing,tail,follow")
    parser.add_argument(
        "--frames",
        choices=("binary", "text"),
        default="binary",
        help="how the follow's data frames travel: binary (header + bytes) or JSON text",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    work = Path(tempfile.mkdtemp(prefix="hyperpod-bench-"))
    server = Server(work)
    rows: list[tuple[str, float]] = []
    listing: list[tuple[str, float]] = []
    follow: dict = {}
    try:
        if "listing" in only:
            listing = bench_listing(server, args.entries)
            rows += listing
        if "tail" in only:
            rows += bench_tail(server, args.log_gb)
        if "follow" in only:
            follow_rows, follow = bench_follow(
                server, args.follow_lines, args.latency_samples, args.frames
            )
            rows += follow_rows
            rows.append(
                ("Direct file polling latency (1 ms poll)", poll_latency(work / "latency.log"))
            )
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(name) for name, _ in rows)
    print(f"{'measure'.ljust(width)}  seconds")
    for name, seconds in rows:
        print(f"{name.ljust(width)}  {seconds:8.4f}")
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if listing:
        ratio = listing[1][1] / listing[0][1]
        print(f"listing ratio API(cold)/scandir+stat = {ratio:.2f}x (target <= 1.5x)")
        steady = listing[3][1] / listing[0][1]
        print(f"listing ratio API(another page, steady)/scandir+stat = {steady:.2f}x")
    if follow:
        share = follow["api"] / follow["direct"]
        print(
            f"follow ratio WebSocket/direct read, frames={args.frames}: {share:.1%} (goal >= 25%: "
            f"{'met' if share >= 0.25 else 'NOT met'})"
        )
        print(
            f"the server's side alone (in process) / direct read = "
            f"{follow['server'] / follow['direct']:.1%}"
        )
    if follow.get("latencies"):
        p99 = percentile(follow["latencies"], 0.99) * 1000
        worst = max(follow["latencies"]) * 1000
        met = p99 < 25 and worst < 50
        print(
            f"follow latency p99 {p99:.1f} ms = {p99 / 25:.2f}x of the 25 ms limit, max "
            f"{worst:.1f} ms = {worst / 50:.2f}x of 50 ms (goal: {'met' if met else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
