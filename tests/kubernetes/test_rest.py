"""The same REST API, panel journey and WebSocket on the Kubernetes backend: preview the manifest,
submit, follow every rank's log to the end, cancel; an unreachable API server answers 503."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from traitlets.config import Config

from ..helpers import Api, log_text
from .conftest import IMAGE, WORKLOAD
from .controller import Controller


@pytest.fixture
def k8s_traits(kubeconfig: Path, controller: Controller, fs_root: Path) -> Iterator[dict[str, Any]]:
    controller.kubelet.claims["fsx-claim"] = str(fs_root)
    yield {"kubeconfig": str(kubeconfig), "image": IMAGE, "node_cache_seconds": 0.0}
    controller.end_all_jobs()


def project(partition: Path) -> None:
    """The program the jobs run, where their workdir is."""
    (partition / "project").mkdir()
    shutil.copy(WORKLOAD, partition / "project" / "train.py")


@pytest.fixture
def jp_server_config(hyperpod_config: dict[str, Any], k8s_traits: dict[str, Any]) -> Config:
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyter_hyperpod": True}},
            "HyperPodApp": hyperpod_config,
            "KubernetesOrchestrator": k8s_traits,
        }
    )


def spec(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "command": ["train.py", "--config", "args.yaml"],
        "workdir": "project",
        "nodes": 2,
        "gpus_per_node": 1,
        **extra,
    }


async def test_cluster_nodes_preview_submit_follow(api: Api, partition: Path) -> None:
    project(partition)
    cluster = (await api.get("cluster")).body
    assert cluster["orchestrator"] == "kubernetes"
    assert cluster["capabilities"]["render_format"] == "manifest"
    assert cluster["capabilities"]["job_kinds"] == ["HyperPodPyTorchJob", "PyTorchJob"]
    assert cluster["filesystem"]["cluster_root"] == "/data"
    nodes = (await api.get("nodes")).body["nodes"]
    assert len(nodes) == 4 and nodes[0]["gpus"]["total"] == 8

    preview = await api.post("jobs/render", spec("preview"))
    assert preview.status == 200, preview.body
    manifest = yaml.safe_load(preview.body["text"])
    # The cluster serves HyperPodPyTorchJob: the default kind.
    assert manifest["kind"] == "HyperPodPyTorchJob"
    container = manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    # IDE paths became cluster paths under the claim's mount.
    assert container["workingDir"] == "/data/shared/project"
    assert container["command"][-3:] == ["train.py", "--config", "args.yaml"]
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["HYPERPOD_JOB_DIR"].startswith("/data/shared/")

    job = await api.submit(spec("restjob", env={"FAKE_STEPS": "4", "FAKE_STEP_SECONDS": "0.05"}))
    assert job["backend_id"] == job["id"]
    frames, _ws = await api.follow(job["id"], rank="all", timeout=60)
    for rank in (0, 1):
        # The program's lines (torchrun adds its own when its peer's store goes away first).
        lines = [line for line in log_text(frames, rank).splitlines() if line.startswith("rank ")]
        assert lines == [f"rank {rank}/2 step {s} loss {1.0 / (s + 1):.4f}" for s in range(4)] + [
            f"rank {rank}/2 done"
        ]
    assert frames[-1]["type"] == "end" and frames[-1]["state"] == "SUCCEEDED"
    final = (await api.get(f"jobs/{job['id']}")).body
    assert final["state"] == "SUCCEEDED" and [r["rank"] for r in final["ranks"]] == [0, 1]
    snapshot = (await api.get(f"jobs/{job['id']}/logs", rank=1, tail=2)).body
    followed = log_text(frames, 1).splitlines(keepends=True)
    assert snapshot["text"] == "".join(followed[-2:])


async def test_cancel_through_the_api(api: Api, partition: Path) -> None:
    project(partition)
    job = await api.submit(
        spec("restcancel", env={"FAKE_STEPS": "100000", "FAKE_STEP_SECONDS": "0.05"})
    )
    await api.wait_for(job["id"], {"RUNNING"}, timeout=30)
    reply = await api.delete(f"jobs/{job['id']}")
    assert reply.status in (200, 202), reply.body
    final = await api.wait_for(job["id"], {"CANCELLED"}, timeout=30)
    assert final["state"] == "CANCELLED"


class TestUnreachable:
    @pytest.fixture
    def k8s_traits(self, tmp_path: Path) -> dict[str, Any]:
        config = tmp_path / "down.kubeconfig"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "down",
                    "clusters": [{"name": "down", "cluster": {"server": "http://127.0.0.1:9"}}],
                    "users": [{"name": "down", "user": {"token": "t"}}],
                    "contexts": [{"name": "down", "context": {"cluster": "down", "user": "down"}}],
                }
            )
        )
        return {"kubeconfig": str(config), "image": IMAGE}

    async def test_nodes_503(self, api: Api) -> None:
        reply = await api.get("nodes")
        assert reply.status == 503
        assert reply.body["error"]["code"] == "backend_unavailable"
        assert "127.0.0.1:9" in reply.body["error"]["message"]
