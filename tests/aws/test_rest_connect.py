"""The panel's way to a HyperPod cluster, through the real Jupyter server: list the region's clusters
(real boto3 against moto), connect to the EKS one (kubeconfig context written, the running server
switched to the kubernetes backend, whose client then lists the emulator's nodes with an EKS token),
and the answers for Slurm clusters, missing credentials, no region and no login."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from ..helpers import Api
from ..kubernetes.conftest import IMAGE, node_object
from ..kubernetes.emulator import EmulatorThread
from .conftest import ACCOUNT, REGION, create_eks_hyperpod, create_slurm_hyperpod, instance_group
from .test_connect_kubernetes import REPO, eks_token_valid


@pytest.fixture
def kubeconfig_path(tmp_path: Path) -> Path:
    return tmp_path / "kube" / "config"


@pytest.fixture
def jp_server_config(hyperpod_config: dict[str, Any], kubeconfig_path: Path) -> Config:
    """The server starts on the local backend; connect switches it to Kubernetes."""
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyter_hyperpod": True}},
            "HyperPodApp": hyperpod_config,
            "KubernetesOrchestrator": {
                "kubeconfig": str(kubeconfig_path),
                "image": IMAGE,
                "node_cache_seconds": 0.0,
            },
        }
    )


@pytest.fixture
def eks_emulator() -> Iterator[EmulatorThread]:
    emulator = EmulatorThread()
    emulator.start()
    assert emulator.emulator is not None
    emulator.emulator.token_check = lambda token: eks_token_valid(token, "hyperpod-eks")
    emulator.put_many("v1/nodes", [node_object(i) for i in range(3)])
    yield emulator
    emulator.stop()


@pytest.fixture
def clusters(aws: str, eks_emulator: EmulatorThread, monkeypatch: pytest.MonkeyPatch) -> str:
    """An EKS HyperPod cluster whose EKS endpoint is the emulator, and a Slurm one."""
    from moto.eks.models import eks_backends

    create_eks_hyperpod("ml-cluster", "hyperpod-eks", [instance_group("worker-group-1", 3)])
    eks_backends[ACCOUNT][REGION].clusters["hyperpod-eks"].endpoint = eks_emulator.url
    create_slurm_hyperpod("slurm-cluster", [instance_group("controller", 1, "ml.m5.xlarge")])
    # The kubeconfig's exec plugin runs `python -m jupyter_hyperpod.aws` for the token.
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    return aws


async def test_list_clusters_eks_and_slurm(api: Api, clusters: str) -> None:
    reply = await api.get("aws/clusters")
    assert reply.status == 200, reply.body
    assert reply.body["region"] == REGION
    by_name = {c["name"]: c for c in reply.body["clusters"]}
    assert set(by_name) == {"ml-cluster", "slurm-cluster"}
    eks = by_name["ml-cluster"]
    assert eks["orchestrator"] == "eks" and eks["connectable"] and eks["reason"] is None
    assert eks["eks_cluster_arn"].endswith(":cluster/hyperpod-eks")
    assert eks["arn"].startswith(f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/")
    assert eks["status"]
    slurm = by_name["slurm-cluster"]
    assert slurm["orchestrator"] == "slurm" and not slurm["connectable"]
    assert "Slurm" in slurm["reason"]


async def test_connect_switches_the_running_server(
    api: Api, clusters: str, kubeconfig_path: Path
) -> None:
    before = await api.get("cluster")
    assert before.body["orchestrator"] == "local"
    assert before.body["capabilities"]["aws_connect"] is True

    reply = await api.post("aws/connect", {"cluster": "ml-cluster", "namespace": "team-a"})
    assert reply.status == 200, reply.body
    assert reply.body["orchestrator"] == "kubernetes"
    assert reply.body["name"] == "ml-cluster"
    assert "current-context:" in kubeconfig_path.read_text()

    cluster = await api.get("cluster")
    assert cluster.status == 200, cluster.body
    assert cluster.body["orchestrator"] == "kubernetes"
    assert cluster.body["details"]["hyperpod"]["orchestrator"] == "eks"
    assert cluster.body["details"]["hyperpod"]["instance_groups"][0]["name"] == "worker-group-1"
    nodes = await api.get("nodes")
    assert nodes.status == 200, nodes.body
    assert [n["name"] for n in nodes.body["nodes"]] == [f"hyperpod-i-{i:05d}" for i in range(3)]


async def test_connect_to_slurm_names_the_cluster_field(api: Api, clusters: str) -> None:
    reply = await api.post("aws/connect", {"cluster": "slurm-cluster"})
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == "cluster"
    assert "Slurm" in reply.body["error"]["message"]
    assert (await api.get("cluster")).body["orchestrator"] == "local"


async def test_connect_body_errors_name_the_field(api: Api, clusters: str) -> None:
    missing = await api.post("aws/connect", {"region": REGION})
    assert missing.status == 400 and missing.body["error"]["field"] == "cluster"
    unknown = await api.post("aws/connect", {"cluster": "ml-cluster", "zone": "a"})
    assert unknown.status == 400 and unknown.body["error"]["field"] == "zone"
    absent = await api.post("aws/connect", {"cluster": "no-such-cluster"})
    assert absent.status == 404, absent.body
    assert "sagemaker:DescribeCluster" in absent.body["error"]["message"]


async def test_no_credentials_names_the_call_and_permission(
    api: Api, aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    reply = await api.get("aws/clusters")
    assert reply.status == 403, reply.body
    assert reply.body["error"]["code"] == "aws_denied"
    assert "sagemaker:ListClusters" in reply.body["error"]["message"]
    reply = await api.post("aws/connect", {"cluster": "ml-cluster"})
    assert reply.status == 403, reply.body
    assert reply.body["error"]["code"] == "aws_denied"
    assert "sagemaker:DescribeCluster" in reply.body["error"]["message"]
    assert (await api.get("cluster")).body["orchestrator"] == "local"


async def test_no_region_names_the_region_field(
    api: Api, aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    reply = await api.get("aws/clusters")
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == "region"
    reply = await api.post("aws/connect", {"cluster": "ml-cluster"})
    assert reply.status == 400 and reply.body["error"]["field"] == "region"


@pytest.mark.parametrize(("method", "route"), [("GET", "clusters"), ("POST", "connect")])
async def test_unauthenticated_is_refused(
    http_server_client: Any, jp_base_url: str, method: str, route: str
) -> None:
    response = await http_server_client.fetch(
        f"{jp_base_url}hyperpod/api/aws/{route}",
        method=method,
        body=json.dumps({"cluster": "ml-cluster"}) if method == "POST" else None,
        raise_error=False,
    )
    assert response.code == 403
    assert json.loads(response.body)["error"]["code"] == "forbidden"
