"""A real Prometheus (Debian's `prometheus`, started here on 127.0.0.1 with a temp config and
storage) scraping a small DCGM-format exporter every second, and loopback doubles of Amazon
Managed Prometheus (checks the SigV4 signature, then forwards to the real Prometheus) and of
Grafana's data source proxy (checks the bearer token, then forwards)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

PROMETHEUS = "/usr/bin/prometheus"
SCRAPE_SECONDS = 1
ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
REGION = "us-east-1"
GRAFANA_TOKEN = "glsa_test_token_0123456789"
GRAFANA_UID = "prom-uid-1"

# dcgm-exporter's default counters (etc/default-counters.csv) with their HELP text.
HELP = {
    "DCGM_FI_DEV_GPU_UTIL": ("utilization", "GPU utilization (in %)."),
    "DCGM_FI_DEV_FB_USED": ("memory_used_mb", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_FREE": ("memory_free_mb", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", "Power draw (in W)."),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", "GPU temperature (in C)."),
    "DCGM_FI_DEV_XID_ERRORS": ("xid_error", "Value of the last XID error encountered."),
}


@dataclass
class Gpu:
    host: str
    index: int
    utilization: float = 0.0
    memory_used_mb: float = 1024.0
    memory_free_mb: float = 80 * 1024.0 - 1024.0
    power_w: float = 120.5
    temperature_c: float = 41.0
    xid_error: float = 0.0
    pod: str = ""
    namespace: str = ""
    model: str = "NVIDIA H100 80GB HBM3"

    @property
    def uuid(self) -> str:
        return f"GPU-{abs(hash((self.host, self.index))) % 10**8:08d}-0000-0000-0000-000000000000"


@dataclass
class Exporter:
    """Serves /metrics in the Prometheus text format the DCGM exporter writes."""

    url: str
    gpus: dict[tuple[str, int], Gpu] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, host: str, index: int, **values: Any) -> Gpu:
        with self.lock:
            gpu = self.gpus.setdefault((host, index), Gpu(host, index))
            for key, value in values.items():
                setattr(gpu, key, value)
            return gpu

    def remove(self, host: str) -> None:
        with self.lock:
            for key in [k for k in self.gpus if k[0] == host]:
                del self.gpus[key]

    def text(self) -> str:
        lines: list[str] = []
        with self.lock:
            gpus = list(self.gpus.values())
        for name, (attribute, help_text) in HELP.items():
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} gauge")
            for gpu in gpus:
                labels = (
                    f'gpu="{gpu.index}",UUID="{gpu.uuid}",device="nvidia{gpu.index}",'
                    f'modelName="{gpu.model}",Hostname="{gpu.host}",'
                    f'DCGM_FI_DRIVER_VERSION="535.104.05",container="{"main" if gpu.pod else ""}",'
                    f'namespace="{gpu.namespace}",pod="{gpu.pod}"'
                )
                lines.append(f"{name}{{{labels}}} {getattr(gpu, attribute)}")
        return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="package")
def exporter() -> Iterator[Exporter]:
    holder: dict[str, Exporter] = {}

    class Handler(_Quiet):
        def do_GET(self) -> None:
            body = holder["exporter"].text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server, url = serve(Handler)
    holder["exporter"] = Exporter(url)
    yield holder["exporter"]
    server.shutdown()


@pytest.fixture(scope="package")
def prometheus(exporter: Exporter, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real Prometheus server scraping the exporter every second."""
    if not os.access(PROMETHEUS, os.X_OK):
        pytest.skip("Debian's prometheus is not installed (scripts/setup.sh installs it)")
    work = tmp_path_factory.mktemp("prometheus")
    target = urllib.parse.urlsplit(exporter.url).netloc
    (work / "prometheus.yml").write_text(
        "global:\n"
        f"  scrape_interval: {SCRAPE_SECONDS}s\n"
        f"  scrape_timeout: {SCRAPE_SECONDS}s\n"
        "scrape_configs:\n"
        "  - job_name: dcgm-exporter\n"
        "    honor_labels: true\n"  # as dcgm-exporter's ServiceMonitor: keep its pod/namespace
        f"    static_configs: [{{targets: ['{target}']}}]\n"
    )
    port = free_port()
    log = open(work / "prometheus.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
            "--query.lookback-delta=30s",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(url), timeout=60, what="prometheus ready")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_until(check: Callable[[], Any], *, timeout: float = 30, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _forward(handler: BaseHTTPRequestHandler, upstream: str, path: str, body: bytes) -> None:
    request = urllib.request.Request(
        upstream + path,
        data=body if handler.command == "POST" else None,
        method=handler.command,
        headers={"Content-Type": handler.headers.get("Content-Type", "")}
        if handler.command == "POST"
        else {},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, payload = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, payload = error.code, error.read()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def _deny(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def verify_sigv4(
    method: str, url: str, headers: Any, body: bytes, secrets: dict[str, str]
) -> str | None:
    """None when the request carries a valid SigV4 signature for `aps`, else why not.

    The signature is recomputed with botocore's own signer from what was received: the headers
    the request says it signed (SignedHeaders), its X-Amz-Date as the signing time, its body
    (AWS docs, "Create a signed AWS API request": canonical request, string to sign, signature)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    authorization = headers.get("Authorization", "")
    if not authorization.startswith("AWS4-HMAC-SHA256 "):
        return "Missing Authentication Token"
    fields = dict(
        part.strip().split("=", 1) for part in authorization[len("AWS4-HMAC-SHA256 ") :].split(",")
    )
    access_key, date, region, service, terminator = fields["Credential"].split("/")
    if access_key not in secrets:
        return "The security token included in the request is invalid."
    if service != "aps" or terminator != "aws4_request" or region != REGION:
        return (
            f"Credential should be scoped to a valid region and service aps, not {region}/{service}"
        )
    amz_date = headers.get("X-Amz-Date", "")
    if not amz_date.startswith(date):
        return "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date"
    signed = fields["SignedHeaders"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return "host and x-amz-date must be signed"
    copy = AWSRequest(
        method=method, url=url, data=body, headers={name: headers.get(name, "") for name in signed}
    )
    copy.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(access_key, secrets[access_key]), service, region)
    canonical = signer.canonical_request(copy)
    expected = signer.signature(signer.string_to_sign(copy, canonical), copy)
    if expected != fields["Signature"]:
        return (
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method."
        )
    return None


@pytest.fixture(scope="package")
def amp(prometheus: str) -> Iterator[str]:
    """Amazon Managed Prometheus' query API on loopback: /workspaces/<id>/api/v1/query(_range),
    SigV4-checked (403 with AMP's JSON `message` otherwise), answered by the real Prometheus."""
    secrets = {ACCESS_KEY: SECRET_KEY}

    class Handler(_Quiet):
        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            host = self.headers.get("Host", "")
            problem = verify_sigv4(
                self.command, f"http://{host}{self.path}", self.headers, body, secrets
            )
            if problem:
                _deny(self, 403, json.dumps({"message": problem}).encode())
                return
            prefix, _, rest = self.path.partition("/api/v1/")
            if not prefix.startswith("/workspaces/ws-") or not rest:
                _deny(self, 404, b'{"message":"Not Found"}')
                return
            _forward(self, prometheus, "/api/v1/" + rest, body)

        do_GET = do_POST = _handle

    server, url = serve(Handler)
    yield f"{url}/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef"
    server.shutdown()


@pytest.fixture(scope="package")
def grafana(prometheus: str) -> Iterator[str]:
    """Grafana's data source proxy on loopback: /api/datasources/proxy/uid/<uid>/<route>, with a
    service account token (401 `{"message":"Unauthorized"}` otherwise, as Grafana answers)."""
    prefix = f"/api/datasources/proxy/uid/{GRAFANA_UID}"

    class Handler(_Quiet):
        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Authorization") != f"Bearer {GRAFANA_TOKEN}":
                _deny(self, 401, b'{"message":"Unauthorized"}')
                return
            if not self.path.startswith(prefix + "/"):
                _deny(self, 404, b'{"message":"Data source not found"}')
                return
            _forward(self, prometheus, self.path[len(prefix) :], body)

        do_GET = do_POST = _handle

    server, url = serve(Handler)
    yield f"{url}{prefix}"
    server.shutdown()


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid() % 1000:03d}{int(time.time() * 1000) % 100000:05d}"
