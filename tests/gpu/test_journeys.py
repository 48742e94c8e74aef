"""The EKS journey with GPU figures: a PyTorchJob submitted through the REST API to the
Kubernetes emulator, its pods' GPUs served by the DCGM-format exporter (pod mapping) and scraped
by the real Prometheus; the job's view and the Cluster view get their figures."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from ..helpers import Api
from ..kubernetes.conftest import IMAGE, controller, k8s, kubeconfig  # noqa: F401
from ..test_contract import check
from .conftest import Exporter


@pytest.fixture
def jp_server_config(
    fs_root: Path,
    tmp_path: Path,
    partition: Path,
    kubeconfig: Path,  # noqa: F811
    controller: Any,  # noqa: F811
    prometheus: str,
) -> Config:
    kubelet = getattr(controller, "kubelet", None)
    if kubelet is not None:  # a kubelet double that runs the pods' programs: the claim is fs_root
        kubelet.claims["fsx-claim"] = str(fs_root)
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyter_hyperpod": True}},
            "HyperPodApp": {
                "orchestrator": "kubernetes",
                "shared_fs_root": str(fs_root),
                "partition": "shared",
                "user": "alice",
                "job_store": str(tmp_path / "jobs.sqlite"),
                "refresh_interval": 0.2,
                "gpu_metrics_url": prometheus,
            },
            "KubernetesOrchestrator": {
                "kubeconfig": str(kubeconfig),
                "image": IMAGE,
                "node_cache_seconds": 0.0,
            },
        }
    )


async def test_an_eks_job_shows_the_gpus_of_its_pods(
    api: Api, partition: Path, exporter: Exporter
) -> None:
    (partition / "project").mkdir()
    (partition / "project" / "train.py").write_text("import time\ntime.sleep(8)\nprint('done')\n")
    namespace = (await api.get("cluster")).body["details"]["namespace"]
    job = await api.submit(
        {
            "name": "gpujob",
            "command": ["train.py"],
            "workdir": "project",
            "nodes": 2,
            "gpus_per_node": 1,
            "kind": "PyTorchJob",  # pods <job>-worker-<rank>, as the training operator names them
            "env": {"FAKE_STEPS": "80", "FAKE_STEP_SECONDS": "0.1"},
        }
    )
    running = await api.wait_for(job["id"], {"RUNNING"}, timeout=60)
    hosts = [rank["node"] or f"hyperpod-i-{rank['rank']:05d}" for rank in running["ranks"]]
    # dcgm-exporter with pod mapping: each GPU labelled with the pod that holds it.
    for rank, host in enumerate(hosts):
        pod = f"{job['id']}-worker-{rank}"
        exporter.set(host, 0, utilization=90 - rank, pod=pod, namespace=namespace)
    exporter.set(
        hosts[0], 7, utilization=3, pod="someone-else-abc123-worker-0", namespace=namespace
    )
    try:
        for _ in range(150):
            nodes = (await api.get("gpu/nodes")).body
            shown = {(n["node"], g["pod"]) for n in nodes["nodes"] for g in n["gpus"]}
            if all((h, f"{job['id']}-worker-{r}") in shown for r, h in enumerate(hosts)):
                break
            await asyncio.sleep(0.2)
        check("/gpu/nodes", "GET", 200, nodes)
        assert nodes["source"] == "prometheus"
        await api.wait_for(job["id"], {"SUCCEEDED"}, timeout=60)
        reply = await api.get(f"jobs/{job['id']}/gpu")
        check("/jobs/{job_id}/gpu", "GET", reply.status, reply.body)
        util = [s for s in reply.body["series"] if s["metric"] == "utilization"]
        assert {(s["node"], s["gpu"]) for s in util} == {(h, "0") for h in hosts}
        assert {s["points"][-1][1] for s in util} == {90.0, 89.0}
    finally:
        for host in hosts:
            exporter.remove(host)
