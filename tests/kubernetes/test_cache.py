"""The watch cache (backends/kubernetes/cache.py) against the API double's watch: changes to nodes
and pods reach `list_nodes` and the REST API without a list per request, a version the server
no longer has (410) makes it list again, and an API server restart is recovered from."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from traitlets.config import Config

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.backends.kubernetes.manifest import JOB_ID_LABEL, KUBEFLOW_INDEX_LABEL
from jupyter_hyperpod.client import HyperPodClient
from jupyter_hyperpod.core.backend import StoredJob
from jupyter_hyperpod.core.errors import BackendUnavailable
from jupyter_hyperpod.core.models import ClusterInfo, JobSpec, JobState

from ..helpers import Api
from ..test_contract import check as contract_check
from .conftest import make_settings, node_object, wait_for
from .emulator import EmulatorThread, now_iso
from .test_nodes import pod
from .watch_history import WINDOW

DEADLINE = 20.0  # generous under load; the bench measures the latency itself


@pytest.fixture
def fresh() -> Iterator[EmulatorThread]:
    emulator = EmulatorThread()
    emulator.start()
    emulator.put_many("v1/nodes", [node_object(i) for i in range(3)])
    emulator.put_many("v1/pods", [pod("a", "hyperpod-i-00000", "Running", 4)])
    yield emulator
    emulator.stop()


@pytest.fixture
def kubeconfig(fresh: EmulatorThread, tmp_path: Path) -> Path:
    return fresh.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def core(kubeconfig: Path) -> Iterator[Any]:
    api = k8s_config.new_client_from_config(str(kubeconfig))
    yield k8s_client.CoreV1Api(api)
    api.close()


@pytest.fixture
def backend(fs_root: Path, kubeconfig: Path) -> Iterator[KubernetesOrchestrator]:
    # Short watches, so that renewing them (and the version they resume from) is exercised too.
    orchestrator = KubernetesOrchestrator(
        settings=make_settings(fs_root, kubeconfig, watch_timeout=1.0)
    )
    yield orchestrator
    orchestrator.close()


def synced(backend: KubernetesOrchestrator) -> None:
    backend.list_nodes()
    wait_for(lambda: backend._cache.nodes.fresh and backend._cache.pods.fresh, DEADLINE)


def our_reads(emulator: EmulatorThread) -> list[Any]:
    """Our requests other than the cache's own watches."""
    assert emulator.emulator is not None
    return [
        r
        for r in list(emulator.emulator._requests)
        if r.headers.get("User-Agent", "").startswith("jupyter-hyperpod")
        and r.params.get("watch") != "true"
    ]


def node(backend: KubernetesOrchestrator, name: str) -> Any:
    return next((n for n in backend.list_nodes() if n.name == name), None)


def test_changes_reach_list_nodes_from_memory(
    fresh: EmulatorThread, core: Any, backend: KubernetesOrchestrator
) -> None:
    synced(backend)
    assert node(backend, "hyperpod-i-00000").gpus.allocated == 4
    before = len(our_reads(fresh))

    added = node_object(9)
    added.pop("apiVersion")
    core.create_node(added)
    wait_for(lambda: node(backend, "hyperpod-i-00009"), DEADLINE)
    core.delete_node("hyperpod-i-00001")
    wait_for(lambda: node(backend, "hyperpod-i-00001") is None, DEADLINE)
    core.patch_node("hyperpod-i-00002", {"spec": {"unschedulable": True}})
    wait_for(lambda: node(backend, "hyperpod-i-00002").state == "cordoned", DEADLINE)
    # A pod that finishes no longer holds its GPUs.
    core.patch_namespaced_pod_status("a", "default", {"status": {"phase": "Succeeded"}})
    wait_for(lambda: node(backend, "hyperpod-i-00000").gpus.allocated == 0, DEADLINE)
    core.create_namespaced_pod(
        "team-a", {**pod("b", "hyperpod-i-00009", "Running", 8), "apiVersion": "v1"}
    )
    wait_for(lambda: node(backend, "hyperpod-i-00009").gpus.allocated == 8, DEADLINE)

    assert {n.name for n in backend.list_nodes()} == {
        "hyperpod-i-00000",
        "hyperpod-i-00002",
        "hyperpod-i-00009",
    }
    # Every one of those reads was answered from memory: not one list or get.
    assert our_reads(fresh)[before:] == []
    status = backend.cache_status()
    assert status["nodes"]["synced"] and status["nodes"]["connected"]
    assert status["nodes"]["stale_s"] == 0 and status["nodes"]["items"] == 3
    assert status["pods"]["items"] == 2


def test_an_expired_version_lists_again(
    fresh: EmulatorThread, core: Any, backend: KubernetesOrchestrator
) -> None:
    synced(backend)
    assert backend.cache_status()["nodes"]["relists"] == 1
    assert fresh.emulator is not None

    async def compact() -> None:
        assert fresh.emulator is not None
        # The connection drops; a change is made and compacted away before the cache watches
        # again from the version it had: 410, list again.
        fresh.emulator.history.cut()
        fresh.emulator.store("v1/nodes", [node_object(5)])
        fresh.emulator.history.compact()

    fresh.run(compact())
    wait_for(lambda: backend.cache_status()["nodes"]["relists"] >= 2, DEADLINE)
    assert node(backend, "hyperpod-i-00005") is not None
    core.patch_node("hyperpod-i-00001", {"spec": {"unschedulable": True}})
    wait_for(lambda: node(backend, "hyperpod-i-00001").state == "cordoned", DEADLINE)
    assert backend.cache_status()["nodes"]["error"] is None
    typed = backend.watch_cache_status().nodes
    assert typed.expired >= 1 and typed.relists == typed.expired + 1
    assert typed.last_event_age_s is not None and typed.last_list_age_s is not None


def test_a_watch_that_falls_behind_the_window_lists_again(
    fresh: EmulatorThread, backend: KubernetesOrchestrator
) -> None:
    """More changes at once than the server keeps (a burst of pods): the watch that had not sent
    them all yet is ended, its version is then too old, and the cache lists again rather than
    go on without the ones it missed."""
    synced(backend)
    assert fresh.emulator is not None
    fresh.emulator.history.window = 50
    try:
        fresh.put_many(
            "v1/pods", [pod(f"burst-{i}", "hyperpod-i-00001", "Running", 0) for i in range(400)]
        )
        wait_for(lambda: backend.cache_status()["pods"]["items"] == 401, DEADLINE)
    finally:
        fresh.emulator.history.window = WINDOW
    status = backend.cache_status()["pods"]
    assert status["expired"] >= 1 and status["relists"] == status["expired"] + 1


def test_an_api_server_restart_is_recovered(
    fresh: EmulatorThread, core: Any, backend: KubernetesOrchestrator
) -> None:
    synced(backend)
    fresh.stop_server()
    # The watch is cut: memory is no longer current, so a read lists (and the API is down).
    wait_for(lambda: not backend.cache_status()["nodes"]["connected"], DEADLINE)
    with pytest.raises(BackendUnavailable):
        backend.list_nodes()
    assert backend.cache_status()["nodes"]["stale_s"] >= 0
    fresh.put("v1/nodes", node_object(7))  # written while we could not watch
    fresh.start_server()
    # The restarted server's watch cache starts now: the old version is gone, one more list.
    # (The informer counts as connected once the watch's response starts, a moment before its
    # one event, the 410, is read: wait for the list that causes.)
    wait_for(
        lambda: (
            backend._cache.nodes.fresh
            and backend._cache.pods.fresh
            and backend.cache_status()["nodes"]["relists"] >= 2
        ),
        DEADLINE,
    )
    assert backend.watch_cache_status().nodes.expired >= 1
    before = len(our_reads(fresh))
    assert node(backend, "hyperpod-i-00007") is not None
    core.delete_node("hyperpod-i-00007")
    wait_for(lambda: node(backend, "hyperpod-i-00007") is None, DEADLINE)
    assert our_reads(fresh)[before:] == []


def test_close_stops_the_watches(backend: KubernetesOrchestrator) -> None:
    synced(backend)
    threads = [backend._cache.nodes._thread, backend._cache.pods._thread]
    backend.close()
    for thread in threads:
        assert thread is not None
        thread.join(10)
        assert not thread.is_alive()


def test_the_double_watches_from_a_version(fresh: EmulatorThread, core: Any) -> None:
    """The API double itself, with the raw client: from a list's version only later changes,
    a bookmark before the timeout, and 410 once the version is compacted away."""
    listed = json.loads(core.list_node(_preload_content=False).data)
    version = listed["metadata"]["resourceVersion"]
    core.patch_node("hyperpod-i-00001", {"metadata": {"labels": {"x": "1"}}})
    response = core.list_node(
        watch=True,
        resource_version=version,
        allow_watch_bookmarks=True,
        timeout_seconds=3,
        _preload_content=False,
    )
    events = [json.loads(line) for line in response.data.splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["MODIFIED", "BOOKMARK"]
    modified = events[0]["object"]["metadata"]
    assert modified["name"] == "hyperpod-i-00001" and int(modified["resourceVersion"]) > int(
        version
    )
    assert events[1]["object"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"resourceVersion": modified["resourceVersion"]},
    }

    async def compact() -> None:
        assert fresh.emulator is not None
        fresh.emulator.history.compact()

    fresh.run(compact())
    response = core.list_node(
        watch=True, resource_version=version, timeout_seconds=3, _preload_content=False
    )
    (gone,) = [json.loads(line) for line in response.data.splitlines() if line.strip()]
    assert gone["type"] == "ERROR" and gone["object"]["code"] == 410
    assert gone["object"]["reason"] == "Expired"


# -- through the REST API of a real Jupyter server ---------------------------------------------
@pytest.fixture
def jp_server_config(hyperpod_config: dict[str, Any], kubeconfig: Path) -> Config:
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyter_hyperpod": True}},
            "HyperPodApp": hyperpod_config,
            "KubernetesOrchestrator": {"kubeconfig": str(kubeconfig), "image": "i:1"},
        }
    )


async def poll(api: Api, check: Any) -> list[dict[str, Any]]:
    import asyncio
    import time

    end = time.monotonic() + DEADLINE
    while True:
        nodes = (await api.get("nodes")).body["nodes"]
        if check(nodes):
            return nodes  # type: ignore[no-any-return]
        assert time.monotonic() < end, f"not seen in time: {nodes}"
        await asyncio.sleep(0.05)


async def poll_cache(api: Api, check: Any) -> dict[str, Any]:
    """GET cluster until its watch cache satisfies `check`; the body, checked by the contract."""
    end = time.monotonic() + DEADLINE
    while True:
        reply = await api.get("cluster")
        assert reply.status == 200, reply.body
        cache = ClusterInfo.model_validate(reply.body).watch_cache  # the client's typed model
        assert cache is not None
        if check(cache):
            contract_check("/cluster", "GET", 200, reply.body)
            return reply.body  # type: ignore[no-any-return]
        assert time.monotonic() < end, f"not seen in time: {cache}"
        await asyncio.sleep(0.05)


async def test_cluster_and_doctor_report_the_watch_cache(
    api: Api, jp_serverapp: Any, fresh: EmulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET cluster's `watch_cache` and doctor's check: not synced while pods may not be listed
    (403, as RBAC answers a user without list on pods cluster-wide), synced once they may."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # doctor's AWS checks: no IMDS
    assert fresh.emulator is not None
    fresh.emulator.denied_resources.add("pods")
    body = await poll_cache(api, lambda cache: not cache.started)  # no read has needed it yet
    assert body["watch_cache"]["enabled"] is True and body["watch_cache"]["fresh"] is False

    doctor = (await api.get("diagnose")).body
    (seen,) = [c for c in doctor["checks"] if c["name"] == "watch cache"]
    assert seen["status"] == "warn", seen
    assert "not synced" in seen["detail"] and "pods not listed" in seen["detail"]
    assert "lists nodes and pods from the API server directly" in seen["detail"]
    assert "list and watch nodes and pods" in seen["fix"]
    cache = ClusterInfo.model_validate(
        await poll_cache(api, lambda cache: cache.nodes.synced and cache.pods.error)
    ).watch_cache
    assert cache is not None and not cache.fresh and not cache.pods.synced
    assert cache.pods.error and "not allowed to list pods" in cache.pods.error

    fresh.emulator.denied_resources.clear()
    cache = ClusterInfo.model_validate(await poll_cache(api, lambda cache: cache.fresh)).watch_cache
    assert cache is not None and cache.pods.error is None
    for resource, items in ((cache.nodes, 3), (cache.pods, 1)):
        assert resource.synced and resource.connected and resource.stale_s == 0
        assert resource.items == items and resource.relists == 1 and resource.expired == 0
        assert resource.last_list_age_s is not None and resource.resource_version
    doctor = (await api.get("diagnose")).body
    (seen,) = [c for c in doctor["checks"] if c["name"] == "watch cache"]
    assert seen["status"] == "pass", seen
    assert seen["detail"].startswith("synced and watching: 3 nodes, listed ")
    assert "; 1 pods, listed " in seen["detail"] and "0 relists after 410" in seen["detail"]

    # The Python client reads it through its typed model.
    client = HyperPodClient(jp_serverapp.connection_url, jp_serverapp.identity_provider.token)
    try:
        info = await asyncio.get_running_loop().run_in_executor(None, client.cluster)
    finally:
        client.close()
    assert info.watch_cache is not None and info.watch_cache.fresh
    assert info.watch_cache.nodes.items == 3 and info.watch_cache.pods.items == 1


async def test_rest_nodes_follow_the_cluster(api: Api, fresh: EmulatorThread, core: Any) -> None:
    nodes = await poll(api, lambda nodes: len(nodes) == 3)
    assert {n["name"] for n in nodes} == {f"hyperpod-i-0000{i}" for i in range(3)}
    core.patch_node("hyperpod-i-00001", {"spec": {"unschedulable": True}})
    await poll(
        api,
        lambda nodes: any(
            n["name"] == "hyperpod-i-00001" and n["state"] == "cordoned" for n in nodes
        ),
    )
    core.delete_node("hyperpod-i-00002")
    await poll(api, lambda nodes: len(nodes) == 2)


def test_refresh_takes_running_pods_from_memory(
    fresh: EmulatorThread, core: Any, backend: KubernetesOrchestrator
) -> None:
    """A running job's pods come from the cache; once the object says it ended, its pods are
    read from the API once more (their last states must not lag behind the object)."""
    name = "cached-job"
    labels = {"app.kubernetes.io/managed-by": "jupyter-hyperpod", JOB_ID_LABEL: name}

    def put_job(condition: str) -> None:
        fresh.put(
            "kubeflow.org/v1/pytorchjobs",
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": name, "namespace": "default", "labels": labels},
                "spec": {},
                "status": {
                    "conditions": [
                        {"type": condition, "status": "True", "lastTransitionTime": now_iso()}
                    ]
                },
            },
        )

    put_job("Running")
    for rank in range(2):
        fresh.put(
            "v1/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-worker-{rank}",
                    "namespace": "default",
                    "labels": {JOB_ID_LABEL: name, KUBEFLOW_INDEX_LABEL: str(rank)},
                },
                "spec": {"containers": [{"name": "pytorch", "image": "i"}]},
                "status": {"phase": "Running"},
            },
        )
    job = StoredJob(
        id=name,
        spec=JobSpec(name="cached", command=["x"], nodes=2),
        state=JobState.RUNNING,
        backend_id=name,
        created=time.time(),
        started=None,
        data={"namespace": "default", "kind": "PyTorchJob", "workers": 2},
    )
    synced(backend)
    before = len(our_reads(fresh))
    update = wait_for(lambda: backend.refresh([job])[job.id], DEADLINE)
    assert update.state is JobState.RUNNING and len(update.ranks or []) == 2
    assert not [r for r in our_reads(fresh)[before:] if r.url.path.endswith("/pods")]

    put_job("Succeeded")
    before = len(our_reads(fresh))
    assert backend.refresh([job])[job.id].state is JobState.SUCCEEDED
    pod_lists = [r for r in our_reads(fresh)[before:] if r.url.path.endswith("/pods")]
    assert len(pod_lists) == 1 and name in pod_lists[0].params["labelSelector"]
