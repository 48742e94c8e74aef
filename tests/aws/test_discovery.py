"""AWS discovery through the real boto3 against moto's server: HyperPod clusters (EKS and Slurm),
nodes (paginated), EKS kubeconfig with an STS-presigned token, FSx, Studio, error messages."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
import yaml

from jupyter_hyperpod.aws import discovery, eks, fsx, hyperpod, studio
from jupyter_hyperpod.core.errors import Forbidden, InvalidRequest

from .conftest import (
    ACCOUNT,
    ASSOCIATIONS,
    REGION,
    USER_PROFILES,
    create_eks_hyperpod,
    create_slurm_hyperpod,
    instance_group,
)

REPO = Path(__file__).resolve().parents[2]


def decode_token(token: str) -> dict[str, Any]:
    assert token.startswith("k8s-aws-v1.")
    encoded = token[len("k8s-aws-v1.") :]
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    parsed = urlparse(url)
    return {
        "url": url,
        "host": parsed.netloc,
        "query": {k: v[0] for k, v in parse_qs(parsed.query).items()},
    }


def test_clusters_eks_and_slurm_alike(aws: str) -> None:
    ids = create_eks_hyperpod(
        "ml-cluster",
        "hyperpod-eks",
        [instance_group("worker-group-1", 250), instance_group("controller", 1, "ml.m5.xlarge")],
    )
    create_slurm_hyperpod("slurm-cluster", [instance_group("compute", 2)])
    sagemaker = boto3.client("sagemaker")
    clusters = {c["name"]: c for c in hyperpod.list_clusters(sagemaker)}
    assert clusters["ml-cluster"]["orchestrator"] == "eks"
    assert clusters["ml-cluster"]["eks_cluster_arn"] == ids["eks_arn"]
    assert clusters["slurm-cluster"]["orchestrator"] == "slurm"
    assert clusters["slurm-cluster"]["eks_cluster_arn"] is None

    described = hyperpod.describe_cluster(sagemaker, "ml-cluster")
    assert described["arn"] == ids["arn"] and described["eks_cluster_name"] == "hyperpod-eks"
    groups = {g["name"]: g for g in described["instance_groups"]}
    assert (
        groups["worker-group-1"]["instance_type"] == "ml.p5.48xlarge"
        and groups["worker-group-1"]["current_count"] == 250
    )
    assert (
        len(described["nodes"]) == 251
        and len({n["instance_id"] for n in described["nodes"]}) == 251
    )
    assert {n["instance_group"] for n in described["nodes"]} == {"worker-group-1", "controller"}
    slurm = hyperpod.describe_cluster(sagemaker, "slurm-cluster", with_nodes=False)
    assert slurm["orchestrator"] == "slurm"


def test_repeated_page_token_does_not_loop(aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some moto versions answer every page with the same NextToken: we stop instead of looping."""
    from moto.sagemaker.responses import SageMakerResponse

    create_slurm_hyperpod("loop", [instance_group("compute", 3)])
    calls = []

    def same_token(self: SageMakerResponse) -> str:
        calls.append(self._get_param("NextToken"))
        node = {
            "InstanceGroupName": "compute",
            "InstanceId": f"i-{len(calls)}",
            "InstanceType": "ml.p5.48xlarge",
            "LaunchTime": 1700000000,
            "InstanceStatus": {"Status": "Running", "Message": ""},
        }
        return json.dumps({"ClusterNodeSummaries": [node], "NextToken": "again"})

    monkeypatch.setattr(SageMakerResponse, "list_cluster_nodes", same_token)
    nodes = hyperpod.list_cluster_nodes(boto3.client("sagemaker"), "loop")
    assert calls == [None, "again"] and [n["instance_id"] for n in nodes] == ["i-1", "i-2"]


def test_connect_writes_a_context_with_a_presigned_token(aws: str, tmp_path: Path) -> None:
    ids = create_eks_hyperpod("ml-cluster", "hyperpod-eks", [instance_group("worker-group-1", 2)])
    kubeconfig = tmp_path / "kube" / "config"
    kubeconfig.parent.mkdir()
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "other",
                "clusters": [{"name": "other", "cluster": {"server": "https://other"}}],
                "users": [{"name": "other", "user": {"token": "x"}}],
                "contexts": [{"name": "other", "context": {"cluster": "other", "user": "other"}}],
            }
        )
    )
    result = discovery.connect(
        "ml-cluster", kubeconfig=str(kubeconfig), auth="token", namespace="team-a"
    )
    assert result["context"] == ids["eks_arn"] and result["eks_cluster"] == "hyperpod-eks"
    config = yaml.safe_load(kubeconfig.read_text())
    assert config["current-context"] == ids["eks_arn"]
    assert {c["name"] for c in config["contexts"]} == {"other", ids["eks_arn"]}, (
        "other contexts are kept"
    )
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ids["eks_arn"])
    described = boto3.client("eks").describe_cluster(name="hyperpod-eks")["cluster"]
    assert cluster == {
        "server": described["endpoint"],
        "certificate-authority-data": described["certificateAuthority"]["data"],
    }
    context = next(c["context"] for c in config["contexts"] if c["name"] == ids["eks_arn"])
    assert context["namespace"] == "team-a"
    token = next(u["user"]["token"] for u in config["users"] if u["name"] == ids["eks_arn"])
    decoded = decode_token(token)
    query = decoded["query"]
    assert query["Action"] == "GetCallerIdentity" and query["X-Amz-Expires"] == "60"
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"].split(";")
    assert (
        query["X-Amz-Credential"].startswith("AKIAIOSFODNN7EXAMPLE/")
        and f"/{REGION}/sts/" in query["X-Amz-Credential"]
    )
    assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"


def test_connect_refuses_a_slurm_cluster(aws: str, tmp_path: Path) -> None:
    create_slurm_hyperpod("slurm-cluster", [instance_group("compute", 2)])
    with pytest.raises(InvalidRequest) as error:
        discovery.connect("slurm-cluster", kubeconfig=str(tmp_path / "config"))
    assert "Slurm" in error.value.message
    assert not (tmp_path / "config").exists()


def test_token_command_is_an_exec_credential(aws: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_hyperpod.aws",
            "token",
            "--cluster-name",
            "hyperpod-eks",
            "--region",
            REGION,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    credential = json.loads(result.stdout)
    assert (
        credential["kind"] == "ExecCredential"
        and credential["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    )
    assert credential["status"]["expirationTimestamp"].endswith("Z")
    assert decode_token(credential["status"]["token"])["query"]["Action"] == "GetCallerIdentity"


def test_cli_lists_clusters(aws: str) -> None:
    create_eks_hyperpod("ml-cluster", "hyperpod-eks", [instance_group("worker-group-1", 2)])
    create_slurm_hyperpod("slurm-cluster", [instance_group("compute", 2)])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "jupyter_hyperpod.aws", "clusters"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    listed = {c["name"]: c["orchestrator"] for c in json.loads(result.stdout)}
    assert listed == {"ml-cluster": "eks", "slurm-cluster": "slurm"}


def test_fsx_with_s3_links(aws: str) -> None:
    client = boto3.client("fsx")
    system = client.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        StorageType="SSD",
        SubnetIds=["subnet-0123456789abcdef0"],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
    )["FileSystem"]
    fs_id = system["FileSystemId"]
    ASSOCIATIONS[fs_id] = [
        {
            "AssociationId": "dra-0123456789abcdef0",
            "FileSystemId": fs_id,
            "Lifecycle": "AVAILABLE",
            "FileSystemPath": "/datasets",
            "DataRepositoryPath": "s3://my-bucket/datasets",
            "S3": {
                "AutoImportPolicy": {"Events": ["NEW", "CHANGED"]},
                "AutoExportPolicy": {"Events": ["NEW"]},
            },
        }
    ]
    assert fsx.file_system_id_from_path(f"/mnt/custom-file-systems/fsx_lustre/{fs_id}") == fs_id
    info = fsx.describe_fsx(client, fs_id)
    assert (
        info["id"] == fs_id
        and info["capacity_gib"] == 1200
        and info["deployment_type"] == "PERSISTENT_2"
    )
    assert info["mount_name"] == system["LustreConfiguration"]["MountName"]
    assert info["data_repository_associations"] == [
        {
            "id": "dra-0123456789abcdef0",
            "path": "/datasets",
            "s3": "s3://my-bucket/datasets",
            "lifecycle": "AVAILABLE",
            "auto_import": ["NEW", "CHANGED"],
            "auto_export": ["NEW"],
        }
    ]
    details = discovery.cluster_details(
        shared_fs_root=f"/mnt/custom-file-systems/fsx_lustre/{fs_id}", region=REGION
    )
    assert details["fsx"]["id"] == fs_id


def test_studio_metadata_picks_user_and_partition(aws: str, tmp_path: Path) -> None:
    metadata = tmp_path / "resource-metadata.json"
    metadata.write_text(
        json.dumps(
            {"UserProfileName": "Data-Scientist", "DomainId": "d-abc123", "SpaceName": "ds-space"}
        )
    )
    USER_PROFILES[("d-abc123", "Data-Scientist")] = {
        "DomainId": "d-abc123",
        "UserProfileName": "Data-Scientist",
        "UserSettings": {
            "CustomFileSystemConfigs": [
                {
                    "FSxLustreFileSystemConfig": {
                        "FileSystemId": "fs-0123456789abcdef0",
                        "FileSystemPath": "/Data-Scientist",
                    }
                }
            ]
        },
    }
    context = studio.studio_context(str(metadata), boto3.client("sagemaker"))
    assert context == {
        "user": "Data-Scientist",
        "domain_id": "d-abc123",
        "space": "ds-space",
        "fsx_id": "fs-0123456789abcdef0",
        "partition": "/Data-Scientist",
    }
    assert studio.studio_context(str(tmp_path / "missing.json"), None) is None
    details = discovery.cluster_details(studio_metadata_path=str(metadata), region=REGION)
    assert details["studio"]["partition"] == "/Data-Scientist"
    assert details["fsx"]["id"] == "fs-0123456789abcdef0" and "error" in details["fsx"]


def test_missing_credentials_name_the_call(aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(Forbidden) as error:
        hyperpod.list_clusters(boto3.Session().client("sagemaker"))
    assert "sagemaker:ListClusters" in error.value.message and "credentials" in error.value.message
    details = discovery.cluster_details(hyperpod_cluster="ml-cluster", region=REGION)
    assert "sagemaker:DescribeCluster" in details["hyperpod_error"]["message"]


def test_access_denied_names_the_permission(aws: str) -> None:
    client = boto3.client("eks")

    def deny(**_: Any) -> tuple[Any, dict[str, Any]]:
        body = {
            "Error": {
                "Code": "AccessDeniedException",
                "Message": "User: arn:aws:sts::123456789012:assumed-role/Studio is not authorized",
            },
            "ResponseMetadata": {"HTTPStatusCode": 403},
        }
        return (type("R", (), {"status_code": 403, "headers": {}, "content": b""})(), body)

    client.meta.events.register("before-call.eks.DescribeCluster", deny)
    with pytest.raises(Forbidden) as error:
        eks.describe_eks(client, "hyperpod-eks")
    assert "eks:DescribeCluster" in error.value.message and "IAM permission" in error.value.message
    assert ACCOUNT in error.value.message


def test_token_command_without_credentials_says_so(aws: str) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_ACCESS") and not k.startswith("AWS_SECRET")
    }
    env.update({"PYTHONPATH": str(REPO), "AWS_EC2_METADATA_DISABLED": "true"})
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_hyperpod.aws",
            "token",
            "--cluster-name",
            "hyperpod-eks",
            "--region",
            REGION,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert (
        result.returncode == 2
        and "sts:GetCallerIdentity" in result.stderr
        and "credentials" in result.stderr
    )
