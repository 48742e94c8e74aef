"""`mlflow_uri: "${MLFLOW_ARN}"` (the seed's line) through the sagemaker-mlflow plugin.

A real MLflow server stands in for the SageMaker tracking server. The plugin sends each request
to $SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT instead of the region's endpoint when it is set
(`sagemaker_mlflow/mlflow_sagemaker_helpers.py`, `construct_tracking_server_url`), signed with
SigV4 for the service `sagemaker-mlflow` (`auth_provider.py`) and carrying the ARN in the
`x-mlflow-sm-tracking-server-arn` header (`mlflow_sagemaker_request_header_provider.py`). A small
proxy in front of the server records what arrives, so the test sees the signing a SageMaker
endpoint would check (the MLflow server itself ignores it).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from jupyter_hyperpod.metrics import read_job_metrics

from .conftest import run_module

pytest.importorskip("sagemaker_mlflow")

ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/seed-demo"
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "AKIDTESTING",
    "AWS_SECRET_ACCESS_KEY": "testing-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Recorder(BaseHTTPRequestHandler):
    """Forwards every request to the MLflow server and records its method, path and headers."""

    upstream: tuple[str, int] = ("127.0.0.1", 0)
    seen: list[tuple[str, str, dict[str, str]]] = []

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.command, self.path, dict(self.headers.items())))
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
        connection.request(self.command, self.path, body=body or None, headers=headers)
        response = connection.getresponse()
        data = response.read()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = _forward

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, list]]:
    """(direct URL, recording proxy URL, the proxy's records) of a real `mlflow server`."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--default-artifact-root",
            str(root / "artifacts"),
            "--no-serve-artifacts",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=(root / "server.log").open("w"),
        stderr=subprocess.STDOUT,
        # MLflow 3's server starts huey job consumers by default, which outlive a terminated
        # server: none here, and the server's process group is ended as a whole below.
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240  # the first start migrates the sqlite store (slow here)
    while True:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("mlflow server did not start: " + (root / "server.log").read_text())
            time.sleep(0.5)
    Recorder.upstream = ("127.0.0.1", port)
    Recorder.seen = []
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        yield url, f"http://127.0.0.1:{proxy.server_address[1]}", Recorder.seen
    finally:
        proxy.shutdown()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def write_seed_style_config(project: Path) -> None:
    config = yaml.safe_load(project.read_text())
    config["mlflow_uri"] = "${MLFLOW_ARN}"  # the seed's own line
    config["mlflow_experiment_name"] = "deepseek-r1-distill-llama-8b-agent"
    project.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.mark.slow
def test_an_arn_tracking_uri_logs_through_sagemaker_mlflow(
    project: Path, tracking_server: tuple[str, str, list]
) -> None:
    direct, proxied, seen = tracking_server
    write_seed_style_config(project)
    run = run_module(
        ["train", "--config", project.name, "--set", "max_steps=3", "--set", "quantization=none"],
        project.parent,
        HYPERPOD_JOB_ID="arn-job-1",
        MLFLOW_ARN=ARN,
        SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT=proxied,
        **FAKE_AWS,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    metrics = read_job_metrics(direct, "arn-job-1")
    assert metrics.run is not None and metrics.run.status == "FINISHED", metrics.message
    assert [p.step for p in metrics.metrics["loss"]] == [1, 2, 3]
    saved = json.loads((project.parent / "model/mlflow_run.json").read_text())
    assert saved["tracking_uri"] == ARN and saved["run_id"] == metrics.run.run_id
    # Every request was signed for SageMaker MLflow in the ARN's region and named the server.
    api = [(m, p, h) for m, p, h in seen if p.startswith("/api/")]
    assert api and any(p.startswith("/api/2.0/mlflow/runs/log-batch") for _, p, _ in api)
    for _, _, headers in api:
        lower = {k.lower(): v for k, v in headers.items()}
        assert (
            lower["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTESTING/")
            and "/us-east-1/sagemaker-mlflow/aws4_request" in lower["authorization"]
        )
        assert lower["x-mlflow-sm-tracking-server-arn"] == ARN


def test_a_bad_tracking_uri_fails_in_seconds_before_the_model_load(project: Path) -> None:
    write_seed_style_config(project)
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    cases = {
        ARN: "cannot use the MLflow tracking server at " + ARN + f" (endpoint {closed})",
        "arn:aws:s3:::not-mlflow": "arn:aws:s3:::not-mlflow is not a SageMaker MLflow ARN",
    }
    for arn, message in cases.items():
        started = time.monotonic()
        run = run_module(
            ["train", "--config", project.name],
            project.parent,
            MLFLOW_ARN=arn,
            SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT=closed,
            **FAKE_AWS,
        )
        elapsed = time.monotonic() - started
        output = run.stdout + run.stderr
        assert run.returncode == 2, output[-3000:]
        assert "configuration error: mlflow_uri: " in run.stdout and message in run.stdout
        assert "Loading weights" not in output and "Traceback" not in output
        assert elapsed < 60, elapsed  # seconds (imports included), not MLflow's minutes of retries
