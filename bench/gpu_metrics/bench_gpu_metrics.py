"""GPU figures of a whole cluster per Cluster-view poll, through a real Prometheus, side by side:

    python bench/gpu_metrics/bench_gpu_metrics.py [--nodes 10,100,500] [--rounds 10]

For each cluster size (8 GPUs a node, the DCGM exporter's six series each) it starts Debian's
Prometheus scraping a DCGM-format exporter, then times
  - `GpuMetrics.nodes()`: the one instant query (`dcgm.nodes_query()`: only the labels it needs)
    and its parsing into nodes, what `GET /hyperpod/api/gpu/nodes` does;
  - the raw HTTP of that query alone (no parsing), and its answer's size;
  - the plain selector of the six series with every label (`{__name__=~"DCGM_...|..."}`);
  - six queries, one per series, every label (a client asking metric by metric).
Prints figures only: this machine's cores are shared with other work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from jupyter_hyperpod.gpu import dcgm  # noqa: E402
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


def timed(function: object, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", default="10,100,500")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--scrape", type=int, default=2, help="scrape interval, seconds")
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
        for node in range(count):
            for gpu in range(8):
                exporter.set(
                    f"ip-10-1-{node // 250}-{node % 250}", gpu, utilization=(node + gpu) % 100
                )
        with tempfile.TemporaryDirectory() as work:
            process, prometheus = start_prometheus(exporter, Path(work), args.scrape)
            try:
                metrics = GpuMetrics(type("S", (), {"gpu_metrics_url": prometheus})())
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    try:
                        if len(metrics.nodes("slurm").nodes) == count:
                            break
                    except Exception:
                        pass
                    time.sleep(0.5)
                one = dcgm.nodes_query()
                size = raw_query(prometheus, one)
                ours = timed(lambda m=metrics: m.nodes("slurm"), args.rounds)
                raw = timed(lambda p=prometheus, q=one: raw_query(p, q), args.rounds)
                plain = "{" + dcgm._names(dcgm.SERIES) + "}"
                plain_size = raw_query(prometheus, plain)
                whole = timed(lambda p=prometheus, q=plain: raw_query(p, q), args.rounds)
                six = timed(
                    lambda p=prometheus: [raw_query(p, name) for name in dcgm.SERIES], args.rounds
                )
                rows.append(
                    (count, count * 8 * len(dcgm.SERIES), size, ours, raw, plain_size, whole, six)
                )
            finally:
                process.terminate()
                process.wait(timeout=30)
                server.shutdown()
    print(
        f"{'nodes':>6} {'series':>7} | {'ours KiB':>9} {'nodes() ms':>10} {'HTTP ms':>8} | "
        f"{'all labels KiB':>14} {'HTTP ms':>8} | {'six queries ms':>14}"
    )
    for count, series, size, ours, raw, plain_size, whole, six in rows:
        print(
            f"{count:>6} {series:>7} | {size / 1024:>9.0f} {ours:>10.1f} {raw:>8.1f} | "
            f"{plain_size / 1024:>14.0f} {whole:>8.1f} | {six:>14.1f}"
        )
    print(json.dumps({"rounds": args.rounds, "median": True}))


if __name__ == "__main__":
    main()
