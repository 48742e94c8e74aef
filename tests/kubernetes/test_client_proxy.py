"""The API client's proxy is the one the environment gives for the API server, worked out once when
the client is built, not again before every request (backends/kubernetes/client.py). Over real
HTTP to the package's API double, with the kubernetes client's own kubeconfig loader."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import configuration as client_configuration

from jupyter_hyperpod.backends.kubernetes.client import KubeClient

from .emulator import EmulatorThread


@pytest.fixture
def counted_proxy_lookups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times this thread's client reads the environment's proxies
    (`urllib.request.getproxies`, which `Configuration` calls when built and when `host` is set);
    other threads' clients (the package's controller) are not counted."""
    calls: list[int] = []
    real = client_configuration.getproxies
    test_thread = threading.get_ident()

    def counted() -> dict[str, str]:
        if threading.get_ident() == test_thread:
            calls.append(1)
        return real()

    monkeypatch.setattr(client_configuration, "getproxies", counted)
    return calls


def list_nodes(kube: KubeClient) -> Any:
    return kube.call_json("list nodes", kube.core.list_node)


def test_requests_do_not_read_the_environment_again(
    k8s: EmulatorThread, kubeconfig: Path, counted_proxy_lookups: list[int]
) -> None:
    kube = KubeClient(kubeconfig=str(kubeconfig))
    list_nodes(kube)  # built here
    built = len(counted_proxy_lookups)
    for _ in range(3):
        list_nodes(kube)
    # Before: the token hook set `host` before each request, and each set read the environment.
    assert len(counted_proxy_lookups) == built
    kube.close()


def test_the_environments_proxy_and_exceptions_still_apply(
    k8s: EmulatorThread, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "no_proxy", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)  # (lower case wins over upper case)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    kube = KubeClient(kubeconfig=str(kubeconfig))
    list_nodes(kube)  # through no proxy: the API double is in NO_PROXY
    configuration = kube.api_client.configuration
    assert configuration.proxy == "http://proxy.invalid:3128"
    assert configuration.no_proxy == "127.0.0.1"
    kube.close()
