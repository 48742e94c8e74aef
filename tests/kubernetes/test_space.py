"""A HyperPod Space talks to its cluster with no kubeconfig: the pod's service account (the token
and CA the kubelet mounts, KUBERNETES_SERVICE_HOST/PORT), over real HTTPS, as in a pod.

The API server is the double (emulator.py) behind a TLS front with a certificate made here (an
API server's certificate names its service IP; here 127.0.0.1), so the kubernetes client's own
in-cluster loader checks the CA file and sends the token as a bearer token, as it does in a pod.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.settings import HyperPodSettings

from .conftest import NODES
from .emulator import EmulatorThread


class TlsFront:
    """Accepts TLS on 127.0.0.1 and forwards the plain bytes to the double; keeps what the
    clients sent first (their request line and headers)."""

    def __init__(self, cert: Path, key: Path, upstream: int) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            client = self.context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        server = socket.create_connection(("127.0.0.1", self.upstream))
        first = client.recv(65536)
        self.requests.append(first)
        server.sendall(first)

        def pump(source: socket.socket, target: socket.socket) -> None:
            try:
                while data := source.recv(65536):
                    target.sendall(data)
            except OSError:
                pass
            finally:
                for end in (source, target):
                    with contextlib.suppress(OSError):
                        end.close()

        threading.Thread(target=pump, args=(server, client), daemon=True).start()
        pump(client, server)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def front(k8s: EmulatorThread, tmp_path: Path) -> Iterator[tuple[TlsFront, Path]]:
    cert, key = tmp_path / "ca.crt", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=kubernetes",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    tls = TlsFront(cert, key, k8s.port)
    yield tls, cert
    tls.close()


def test_a_space_lists_the_cluster_with_its_service_account(
    front: tuple[TlsFront, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tls, cert = front
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("space-token-1")
    (account / "ca.crt").write_bytes(cert.read_bytes())
    (account / "namespace").write_text("hyperpod-ns-team-a")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(tls.port))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    settings = HyperPodSettings(
        orchestrator="kubernetes",
        shared_fs_root=str(tmp_path),
        studio_metadata_path=str(tmp_path / "none.json"),
        service_account_dir=str(account),
        mountinfo_path=str(tmp_path / "none"),
    )
    backend = KubernetesOrchestrator(settings=settings)
    try:
        nodes = backend.list_nodes()
        assert len(nodes) == NODES
        assert backend.kube.host == f"https://127.0.0.1:{tls.port}"
        assert backend.kube.context_name == "in-cluster (namespace hyperpod-ns-team-a)"
        sent = b"\n".join(tls.requests).lower()
        assert b"authorization: bearer space-token-1" in sent
    finally:
        backend.close()
