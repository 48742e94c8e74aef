"""GPU figures of a whole cluster per Cluster-view poll, through a real Prometheus, before and
after, side by side:

    python bench/gpu_metrics/bench_gpu_metrics.py [--nodes 10,100,500] [--rounds 5] [--pollers 8]

For each cluster size (8 GPUs a node, the DCGM exporter's six series each) it starts Debian's
Prometheus scraping a DCGM-format exporter, then times what `GET gpu/nodes` does to answer (the
figures read and parsed, and the JSON body the handler sends):
  - per node: one query per node (what a client asking node by node does);
  - before: one instant query naming every series (`dcgm.nodes_query()`), asked on every call;
  - after, uncached: one query per series for all nodes (`dcgm.metric_queries()`), asked at once
    (`GpuMetrics` with `gpu_metrics_cache_seconds = 0`);
  - polls: `--pollers` clients polling every `--interval` seconds for `--seconds`, each poll timed
    (p50 / p99), before (every poll asks Prometheus) and after (`GpuMetrics` as the server runs
    it: one answer shared for 5 s, the last one served at once while the next loads).
Prints figures only: this machine's cores are shared with other work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from jupyter_hyperpod.core.gpu_models import GpuNodes  # noqa: E402
from jupyter_hyperpod.gpu import dcgm  # noqa: E402
from jupyter_hyperpod.gpu.prometheus import PrometheusClient  # noqa: E402
from jupyter_hyperpod.gpu.reader import GpuMetrics  # noqa: E402
from tests.gpu.conftest import PROMETHEUS, Exporter, free_port, serve  # noqa: E402


def start_prometheus(
    exporter: Exporter, work: Path, scrape: int
) -> tuple[subprocess.Popen[bytes], str]:
    target = urllib.parse.urlsplit(exporter.url).netloc
    (work / "prometheus.yml").write_text(
        f"global: {{scrape_interval: {scrape}s, scrape_timeout: {scrape}s}}\n"
        "scrape_configs:\n"
        f"  - {{job_name: dcgm, honor_labels: true, static_configs: [{{targets: ['{target}']}}]}}\n"
    )
    port = free_port()
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, f"http://127.0.0.1:{port}"


def raw_query(url: str, promql: str) -> int:
    body = urllib.parse.urlencode({"query": promql}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=body, timeout=30) as response:
        return len(response.read())


def timed(function: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def before(client: PrometheusClient) -> str:
    """The earlier `GpuMetrics.nodes()`: one query for every series, on every call."""
    data = client.query(dcgm.nodes_query())
    return GpuNodes(
        source=client.kind, time=time.time(), nodes=dcgm.parse_nodes(data)
    ).model_dump_json()


def nodes_json(metrics: GpuMetrics) -> str:
    """`GET gpu/nodes`'s body, as the service answers it."""
    return metrics.nodes(this_machine=False).model_dump_json()


def per_node(client: PrometheusClient, names: list[str]) -> None:
    for name in names:
        dcgm.parse_nodes(client.query(dcgm.nodes_query([name])))


def polls(
    answer: Callable[[], object], pollers: int, interval: float, seconds: float
) -> list[float]:
    """Each poll's time (ms) of `pollers` clients polling every `interval` s for `seconds`."""
    times: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(offset: float) -> None:
        time.sleep(offset)
        while time.monotonic() < stop:
            start = time.perf_counter()
            answer()
            took = time.perf_counter() - start
            with lock:
                times.append(took * 1000)
            time.sleep(max(0.0, interval - took))

    threads = [
        threading.Thread(target=client, args=(interval * i / pollers,)) for i in range(pollers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return times


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def settings(url: str, cache: float) -> Any:
    return type("S", (), {"gpu_metrics_url": url, "gpu_metrics_cache_seconds": cache})()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", default="10,100,500")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scrape", type=int, default=2, help="scrape interval, seconds")
    parser.add_argument("--pollers", type=int, default=8)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between polls")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the pollers run")
    parser.add_argument("--per-node-max", type=int, default=500, help="skip per node above")
    args = parser.parse_args()
    rows = []
    for count in [int(n) for n in args.nodes.split(",")]:
        holder: dict[str, Exporter] = {}

        from http.server import BaseHTTPRequestHandler

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self, holder: dict[str, Exporter] = holder) -> None:
                body = holder["e"].text().encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        server, url = serve(Handler)
        exporter = holder["e"] = Exporter(url)
        names = [f"ip-10-1-{node // 250}-{node % 250}" for node in range(count)]
        for node, name in enumerate(names):
            for gpu in range(8):
                exporter.set(name, gpu, utilization=(node + gpu) % 100)
        with tempfile.TemporaryDirectory() as work:
            process, prometheus = start_prometheus(exporter, Path(work), args.scrape)
            try:
                uncached = GpuMetrics(settings(prometheus, 0))
                cached = GpuMetrics(settings(prometheus, 5.0))
                client = PrometheusClient(prometheus)
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    try:
                        if len(uncached.nodes(this_machine=False).nodes) == count:
                            break
                    except Exception:
                        pass
                    time.sleep(0.5)
                one_size = raw_query(prometheus, dcgm.nodes_query())
                six_size = sum(raw_query(prometheus, q) for q in dcgm.metric_queries().values())
                node_ms = (
                    timed(partial(per_node, client, names), 1)
                    if count <= args.per_node_max
                    else float("nan")
                )
                old = timed(partial(before, client), args.rounds)
                new = timed(partial(nodes_json, uncached), args.rounds)
                old_polls = polls(
                    partial(before, client), args.pollers, args.interval, args.seconds
                )
                new_polls = polls(
                    partial(nodes_json, cached),
                    args.pollers,
                    args.interval,
                    args.seconds,
                )
                rows.append((count, node_ms, one_size, old, six_size, new, old_polls, new_polls))
                uncached.close()
                cached.close()
            finally:
                process.terminate()
                process.wait(timeout=30)
                server.shutdown()
    print(
        f"{'nodes':>5} | {'per node ms':>11} | {'before: 1 query':>20} | "
        f"{'after: 6 at once':>20} | {f'{args.pollers} pollers, p50 / p99 ms':>31}"
    )
    print(
        f"{'':>5} | {'':>11} | {'KiB':>8} {'ms':>11} | {'KiB':>8} {'ms':>11} | "
        f"{'before':>15} {'after':>15}"
    )
    for count, node_ms, one_size, old, six_size, new, old_polls, new_polls in rows:
        print(
            f"{count:>5} | {node_ms:>11.0f} | {one_size / 1024:>8.0f} {old:>11.1f} | "
            f"{six_size / 1024:>8.0f} {new:>11.1f} | "
            f"{p(old_polls, 0.5):>7.1f} / {p(old_polls, 0.99):>5.0f} "
            f"{p(new_polls, 0.5):>7.1f} / {p(new_polls, 0.99):>5.0f}"
        )
    print(
        json.dumps(
            {
                "rounds": args.rounds,
                "median": True,
                "pollers": args.pollers,
                "interval_s": args.interval,
                "seconds": args.seconds,
            }
        )
    )


if __name__ == "__main__":
    main()
