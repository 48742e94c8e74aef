"""A real `jupyter server` process with the extension, on 127.0.0.1 only, for the tests that need
one outside pytest's event loop (schemathesis, `kill -9`, a private mount namespace)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

TOKEN = "hostile-tests-token"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LiveServer:
    """`python -m jupyter_server` with `c.HyperPodApp` = `hyperpod`, its own config/data/runtime
    directories under `work`, and a token. `prefix` wraps the command (e.g. `unshare -m ...`)."""

    def __init__(
        self, work: Path, hyperpod: dict[str, Any], *, prefix: list[str] | None = None
    ) -> None:
        self.work = work
        self.hyperpod = hyperpod
        self.prefix = prefix or []
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = work / f"server-{self.port}.log"
        self.extra_env: dict[str, str] = {}
        """Set in the server's environment (a PATH with no programs, AWS on loopback...)."""
        self.extra_config: dict[str, Any] = {}
        """More configuration sections (e.g. `KubernetesOrchestrator`)."""
        self.python = sys.executable
        """The interpreter (another user's server needs one that user may run)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60, *, ready_route: str = "cluster") -> LiveServer:
        config_dir = self.work / "jupyter-config"
        config_dir.mkdir(parents=True, exist_ok=True)
        (config_dir / "jupyter_server_config.json").write_text(
            json.dumps(
                {
                    "ServerApp": {"jpserver_extensions": {"jupyter_hyperpod": True}},
                    "HyperPodApp": self.hyperpod,
                    **self.extra_config,
                }
            )
        )
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(config_dir),
            "JUPYTER_DATA_DIR": str(self.work / "jupyter-data"),
            "JUPYTER_RUNTIME_DIR": str(self.work / "jupyter-runtime"),
            "JUPYTER_PLATFORM_DIRS": "1",
            "AWS_EC2_METADATA_DISABLED": "true",
            **self.extra_env,
        }
        command = [
            *self.prefix,
            self.python,
            "-m",
            "jupyter_server",
            f"--port={self.port}",
            "--ip=127.0.0.1",
            "--port-retries=0",
            "--no-browser",
            "--ServerApp.allow_root=True",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={self.work}",
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes it
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                if self.request("GET", ready_route)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server did not answer: {self.log_path.read_text()[-3000:]}")

    def request(
        self,
        method: str,
        route: str,
        body: Any = None,
        *,
        token: str | None = TOKEN,
        timeout: float = 30,
    ) -> tuple[int, Any, dict[str, str]]:
        """(status, JSON body or raw text, headers) of /hyperpod/api/<route>."""
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        elif method in ("POST", "PUT"):
            data = b""
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"token {token}"
        request = urllib.request.Request(
            f"{self.url}/hyperpod/api/{route}", data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw, found = response.status, response.read(), dict(response.headers)
        except urllib.error.HTTPError as error:
            status, raw, found = error.code, error.read(), dict(error.headers)
        try:
            return status, json.loads(raw) if raw else None, found
        except ValueError:
            return status, raw.decode("utf-8", "replace"), found

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the server process itself (not its jobs, which run in their own sessions)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, sig)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
