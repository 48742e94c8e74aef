"""An unreachable API server gives 503, refused credentials 401 -> 403, a refused verb 403 with the
API's message; the backend recovers by itself when the server or the credentials come back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import config as k8s_config

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.errors import BackendUnavailable, Forbidden
from jupyter_hyperpod.core.logprotocol import settle
from jupyter_hyperpod.core.models import JobState

from .conftest import (
    make_launch,
    make_settings,
    node_object,
    program_lines,
    stored,
    wait_for,
    wait_state,
)
from .controller import Controller
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
    # The watch cache (cache.py) answers until its watch notices the server is gone, moments
    # later; from then on a read lists, and fails.
    wait_for(lambda: not backend._cache.nodes.fresh, 30)
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
    launch = make_launch(fs_root, kind="PyTorchJob")
    with pytest.raises(Forbidden) as error:
        backend.submit(launch)
    assert (
        "create PyTorchJob" in error.value.message
        and 'cannot create resource "pytorchjobs"' in error.value.message
    )
    fresh.emulator.denied_resources.clear()
    assert backend.submit(launch).backend_id == launch.job_id
    backend.close()


def test_log_follow_survives_an_api_outage(fs_root: Path, tmp_path: Path) -> None:
    """The stream is cut while the API server is down; the follower reconnects, skips what it
    already has of that container, and the log ends complete, with no line twice."""
    emulator = EmulatorThread()
    emulator.start()
    assert emulator.emulator is not None
    kubeconfig = emulator.write_kubeconfig(tmp_path / "kubeconfig")
    api = k8s_config.new_client_from_config(str(kubeconfig))
    for index in range(2):
        emulator.put("v1/nodes", node_object(index))
    controller = Controller(api, emulator.emulator.logs, ["hyperpod-i-00000", "hyperpod-i-00001"])
    controller.kubelet.claims["fsx-claim"] = str(fs_root)
    controller.start()
    backend = KubernetesOrchestrator(settings=make_settings(fs_root, kubeconfig))
    try:
        launch = make_launch(
            fs_root, "outage", nodes=2, env={"FAKE_STEPS": "30", "FAKE_STEP_SECONDS": "0.1"}
        )
        job = stored(launch, backend.submit(launch))
        reader = backend.log_reader(job, 1)
        wait_for(lambda: b"step 5 " in reader.read(0, 1 << 20))
        emulator.stop_server()
        time.sleep(1.0)
        with pytest.raises(BackendUnavailable):
            backend.refresh([job])
        emulator.start_server()
        wait_state(backend, job, JobState.SUCCEEDED, timeout=60)
        # A final read settles first (as the follow loop and a snapshot do): the spooler may
        # still be reconnecting after the outage when the status already says SUCCEEDED.
        settle(reader)
        text = reader.read(0, 1 << 20).decode()
        assert program_lines(text, 1, 2) == [
            f"rank 1/2 step {s} loss {1.0 / (s + 1):.4f}" for s in range(30)
        ] + ["rank 1/2 done"]
        reader.close()
    finally:
        backend.close()
        controller.stop()
        api.close()
        emulator.stop()
