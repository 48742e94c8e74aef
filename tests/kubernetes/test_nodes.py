"""Nodes from the Kubernetes API: readiness, HyperPod health labels, GPUs, EFA; 2,000 of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.backends.kubernetes.nodes import parse_quantity

from .conftest import make_settings, node_object, wait_for
from .emulator import EmulatorThread


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[EmulatorThread]:
    emulator = EmulatorThread()
    emulator.start()
    yield emulator
    emulator.stop()


@pytest.fixture
def orchestrator(
    fresh: EmulatorThread, fs_root: Path, tmp_path: Path
) -> Iterator[KubernetesOrchestrator]:
    kubeconfig = fresh.write_kubeconfig(tmp_path / "kubeconfig")
    backend = KubernetesOrchestrator(settings=make_settings(fs_root, kubeconfig))
    yield backend
    backend.close()


def pod(
    name: str, node: str, phase: str, gpus: int, namespace: str = "default", efa: int = 0
) -> dict:
    limits = {"nvidia.com/gpu": str(gpus), **({"vpc.amazonaws.com/efa": str(efa)} if efa else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        # Extended resources given only as limits count as requests.
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "i", "resources": {"limits": limits}}],
        },
        "status": {"phase": phase},
    }


def test_health_gpus_and_efa(fresh: EmulatorThread, orchestrator: KubernetesOrchestrator) -> None:
    fresh.put_many(
        "v1/nodes",
        [
            node_object(0),
            node_object(1, health="UnschedulablePendingReplacement"),
            node_object(2, deep="InProgress"),
            node_object(3, ready=False),
            node_object(4, deep="Failed"),
            node_object(5, trainium=True, gpus=16, group="trn-group", deep=None),
        ],
    )
    fresh.put_many(
        "v1/pods",
        [
            pod("a", "hyperpod-i-00000", "Running", 4, efa=2),
            pod("b", "hyperpod-i-00000", "Pending", 2, namespace="team-a"),
            pod("c", "hyperpod-i-00000", "Succeeded", 8),
            pod("d", "hyperpod-i-00002", "Failed", 8),
        ],
    )
    nodes = {node.name: node for node in orchestrator.list_nodes()}
    assert len(nodes) == 6
    first = nodes["hyperpod-i-00000"]
    assert first.state == "ready" and first.health == "healthy" and first.health_detail is None
    assert first.instance_type == "ml.p5.48xlarge" and first.instance_group == "worker-group-1"
    assert (first.gpus.total, first.gpus.allocated, first.gpus.type) == (8, 6, "nvidia.com/gpu")
    assert first.efa == 32 and first.cpus == 191 and first.memory_mb == 2097152
    assert first.labels["sagemaker.amazonaws.com/node-health-status"] == "Schedulable"
    assert "kubernetes.io/hostname" not in first.labels
    replaced = nodes["hyperpod-i-00001"]
    assert replaced.health == "unhealthy" and "replacing" in (replaced.health_detail or "")
    checking = nodes["hyperpod-i-00002"]
    assert checking.health == "degraded" and "deep health check in progress" in (
        checking.health_detail or ""
    )
    assert checking.gpus.allocated == 0
    down = nodes["hyperpod-i-00003"]
    assert (
        down.state == "not-ready"
        and down.health == "unhealthy"
        and "container runtime is down" in (down.health_detail or "")
    )
    assert nodes["hyperpod-i-00004"].health == "unhealthy"
    trainium = nodes["hyperpod-i-00005"]
    assert (trainium.gpus.total, trainium.gpus.type) == (16, "aws.amazon.com/neurondevice")
    assert trainium.instance_group == "trn-group" and trainium.health == "healthy"


def test_nodes_without_pod_permission_still_list(
    fresh: EmulatorThread, orchestrator: KubernetesOrchestrator
) -> None:
    fresh.put_many("v1/nodes", [node_object(0)])
    fresh.put_many("v1/pods", [pod("a", "hyperpod-i-00000", "Running", 4)])
    assert fresh.emulator is not None
    fresh.emulator.denied_resources.add("pods")
    (node,) = orchestrator.list_nodes()
    assert node.gpus.total == 8 and node.gpus.allocated == 0


def test_two_thousand_nodes(fresh: EmulatorThread, orchestrator: KubernetesOrchestrator) -> None:
    fresh.put_many(
        "v1/nodes",
        [node_object(i, health="Schedulable" if i % 100 else "Unschedulable") for i in range(2000)],
    )
    fresh.put_many(
        "v1/pods", [pod(f"p{i}", f"hyperpod-i-{i:05d}", "Running", 8) for i in range(0, 2000, 2)]
    )
    nodes = orchestrator.list_nodes()
    assert len(nodes) == 2000 and len({n.name for n in nodes}) == 2000
    assert sum(1 for n in nodes if n.health == "unhealthy") == 20
    assert (
        sum(n.gpus.total for n in nodes) == 16000 and sum(n.gpus.allocated for n in nodes) == 8000
    )
    assert fresh.emulator is not None
    # Paged: 500 per request, following `continue` (the direct list, unless the watch cache was
    # already synced, and the watch cache's own list: 4 pages each).
    wait_for(lambda: orchestrator._cache.nodes.fresh, 30)
    node_lists = [
        r
        for r in fresh.emulator._requests
        if r.url.path == "/api/v1/nodes" and r.params.get("watch") != "true"
    ]
    assert len(node_lists) in (4, 8) and all(r.params["limit"] == "500" for r in node_lists)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("96", 96),
        ("95500m", 95.5),
        ("1536Gi", 1536 * 1024**3),
        ("2k", 2000),
        ("", 0),
        (None, 0),
        (8, 8),
        ("1e3", 1000),
    ],
)
def test_quantities(text: object, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)
