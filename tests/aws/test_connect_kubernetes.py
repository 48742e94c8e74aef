"""connect -> the Kubernetes backend works at once: the kubeconfig context written from AWS (EKS
endpoint, CA, exec plugin presigning an STS token) drives the real client against the emulator,
which accepts only EKS-style tokens for that cluster; `GET cluster` details come from AWS."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import boto3
import pytest

from jupyter_hyperpod.aws import discovery
from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator

from ..kubernetes.conftest import make_settings, node_object
from ..kubernetes.emulator import EmulatorThread
from .conftest import ACCOUNT, REGION, create_eks_hyperpod, instance_group

REPO = Path(__file__).resolve().parents[2]


def eks_token_valid(token: str, cluster: str) -> bool:
    """What the EKS authenticator checks before calling STS: the prefix, a presigned
    GetCallerIdentity URL, and the cluster id among the signed headers."""
    if not token.startswith("k8s-aws-v1."):
        return False
    encoded = token[len("k8s-aws-v1.") :]
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    query = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
    return (
        query.get("Action") == "GetCallerIdentity"
        and "x-k8s-aws-id" in query.get("X-Amz-SignedHeaders", "").split(";")
        and bool(query.get("X-Amz-Signature"))
        and cluster == "hyperpod-eks"
    )


@pytest.fixture
def eks_api() -> Iterator[EmulatorThread]:
    emulator = EmulatorThread()
    emulator.start()
    assert emulator.emulator is not None
    emulator.emulator.token_check = lambda token: eks_token_valid(token, "hyperpod-eks")
    emulator.put_many("v1/nodes", [node_object(i) for i in range(3)])
    yield emulator
    emulator.stop()


@pytest.mark.parametrize("auth", ["exec", "token"])
def test_connect_then_list_nodes(
    aws: str, eks_api: EmulatorThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, auth: str
) -> None:
    from moto.eks.models import eks_backends

    create_eks_hyperpod("ml-cluster", "hyperpod-eks", [instance_group("worker-group-1", 3)])
    # moto's EKS endpoint is a made-up https URL: point it at the emulated API server.
    eks_backends[ACCOUNT][REGION].clusters["hyperpod-eks"].endpoint = eks_api.url
    fsx = boto3.client("fsx").create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=2400,
        SubnetIds=["subnet-0123456789abcdef0"],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2"},
    )["FileSystem"]
    monkeypatch.setenv(
        "PYTHONPATH", str(REPO)
    )  # for the exec plugin's `python -m jupyter_hyperpod.aws`
    kubeconfig = tmp_path / "kube" / "config"
    result = discovery.connect("ml-cluster", kubeconfig=str(kubeconfig), auth=auth)  # type: ignore[arg-type]

    fs_root = tmp_path / "mnt" / "custom-file-systems" / "fsx_lustre" / fsx["FileSystemId"]
    (fs_root / "Data-Scientist").mkdir(parents=True)
    settings = make_settings(fs_root, kubeconfig)
    backend = KubernetesOrchestrator(settings=settings)
    try:
        nodes = backend.list_nodes()
        assert [n.name for n in nodes] == [f"hyperpod-i-{i:05d}" for i in range(3)]
        assert backend.cluster_name() == "hyperpod-eks"
        details = backend.details()
        assert details["context"] == result["context"]
        assert (
            details["hyperpod"]["name"] == "ml-cluster"
            and details["hyperpod"]["orchestrator"] == "eks"
        )
        assert details["hyperpod"]["instance_groups"][0]["name"] == "worker-group-1"
        assert (
            details["fsx"]["id"] == fsx["FileSystemId"] and details["fsx"]["capacity_gib"] == 2400
        )
        assert details["fsx"]["mount_name"]
    finally:
        backend.close()


def test_without_a_valid_token_the_api_refuses(
    aws: str, eks_api: EmulatorThread, tmp_path: Path
) -> None:
    kubeconfig = eks_api.write_kubeconfig(tmp_path / "config", token="not-an-eks-token")
    backend = KubernetesOrchestrator(settings=make_settings(tmp_path, kubeconfig))
    from jupyter_hyperpod.core.errors import Forbidden

    with pytest.raises(Forbidden):
        backend.list_nodes()
    backend.close()
