"""An unreachable API server gives 503, refused credentials 401 -> 403, a refused verb 403 with the
API's message; the backend recovers by itself when the server or the credentials come back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.errors import BackendUnavailable, Forbidden

from .conftest import make_launch, make_settings, node_object
from .emulator import EmulatorThread


@pytest.fixture
def fresh() -> Iterator[EmulatorThread]:
    emulator = EmulatorThread()
    emulator.start()
    emulator.put_many("v1/nodes", [node_object(0), node_object(1)])
    yield emulator
    emulator.stop()


def test_unreachable_then_back(fresh: EmulatorThread, fs_root: Path, tmp_path: Path) -> None:
    kubeconfig = fresh.write_kubeconfig(tmp_path / "kubeconfig")
    backend = KubernetesOrchestrator(settings=make_settings(fs_root, kubeconfig))
    assert len(backend.list_nodes()) == 2
    fresh.stop_server()
    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as error:
        backend.list_nodes()
    assert error.value.status == 503
    assert "unreachable" in error.value.message and f"127.0.0.1:{fresh.port}" in error.value.message
    assert time.monotonic() - started < 5, "an unreachable API fails fast"
    with pytest.raises(BackendUnavailable):
        backend.submit(make_launch(fs_root))
    fresh.start_server()
    assert len(backend.list_nodes()) == 2
    backend.close()


def test_no_kubeconfig_is_503_with_a_hint(fs_root: Path, tmp_path: Path) -> None:
    backend = KubernetesOrchestrator(settings=make_settings(fs_root, tmp_path / "missing"))
    with pytest.raises(BackendUnavailable) as error:
        backend.list_nodes()
    assert "no kubeconfig" in error.value.message and "connect" in error.value.message


def test_401_then_refreshed_credentials(
    fresh: EmulatorThread, fs_root: Path, tmp_path: Path
) -> None:
    assert fresh.emulator is not None
    fresh.emulator.token_check = lambda token: token == "fresh-token"
    kubeconfig = fresh.write_kubeconfig(tmp_path / "kubeconfig", token="expired-token")
    backend = KubernetesOrchestrator(settings=make_settings(fs_root, kubeconfig))
    with pytest.raises(Forbidden) as error:
        backend.list_nodes()
    assert (
        error.value.status == 403
        and "401" in error.value.message
        and "credentials" in error.value.message
    )
    fresh.write_kubeconfig(kubeconfig, token="fresh-token")
    assert len(backend.list_nodes()) == 2
    backend.close()


def test_403_names_what_was_refused(fresh: EmulatorThread, fs_root: Path, tmp_path: Path) -> None:
    assert fresh.emulator is not None
    fresh.emulator.denied_resources.add("pytorchjobs")
    kubeconfig = fresh.write_kubeconfig(tmp_path / "kubeconfig")
    backend = KubernetesOrchestrator(settings=make_settings(fs_root, kubeconfig))
    launch = make_launch(fs_root)
    with pytest.raises(Forbidden) as error:
        backend.submit(launch)
    assert (
        "create PyTorchJob" in error.value.message
        and 'cannot create resource "pytorchjobs"' in error.value.message
    )
    fresh.emulator.denied_resources.clear()
    assert backend.submit(launch).backend_id == launch.job_id
    backend.close()
