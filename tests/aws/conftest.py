"""moto's server on 127.0.0.1 for the real boto3, with moto's known gaps patched here (test code):
`describe_cluster` keeps the Orchestrator given at creation, `list_cluster_nodes` pages by node id,
FSx for Lustre gets a generated MountName, FSx data repository associations and SageMaker user
profiles are answered from test data; cluster nodes get EC2 instance ids and DescribeClusterNode
their private address and DNS name; ssm:StartSession answers as SSM does (the session itself is
`ssm_plugin_double.py`, the Session Manager plugin's double)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from moto.core.common_models import BaseModel  # noqa: F401 - moto must be importable
from moto.fsx import models as fsx_models
from moto.fsx.responses import FSxResponse
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.sagemaker import models as sagemaker_models
from moto.sagemaker.responses import SageMakerResponse
from moto.ssm.responses import SimpleSystemManagerResponse as SSMResponse

REGION = "us-east-1"
ACCOUNT = "123456789012"

# Test data for the APIs moto does not implement.
ASSOCIATIONS: dict[str, list[dict[str, Any]]] = {}
NODE_ADDRESSES: dict[str, tuple[str, str]] = {}
"""Instance id -> (PrivatePrimaryIp, PrivateDnsHostname) of DescribeClusterNode (botocore's
sagemaker model, ClusterNodeDetails; moto leaves both out). Unset: a 10.1.x.y address."""
SSM_SESSIONS: list[dict[str, Any]] = []
"""Every ssm:StartSession request the double answered."""
SSM_DENIED: set[str] = set()
"""Targets the caller's role may not start a session on: AccessDeniedException, as IAM answers
any action it denies (the error every AWS JSON API returns for a missing permission)."""
SSM_OFFLINE: set[str] = set()
"""Targets whose SSM agent is not connected: StartSession answers TargetNotConnected (botocore's
ssm model lists it among StartSession's errors)."""
USER_PROFILES: dict[tuple[str, str], dict[str, Any]] = {}
_ORCHESTRATORS: dict[str, dict[str, Any]] = {}


def _patch_moto() -> None:
    original_create = SageMakerResponse.create_cluster
    original_describe = sagemaker_models.Cluster.describe

    def create_cluster(self: SageMakerResponse) -> Any:
        orchestrator = self._get_param("Orchestrator")
        if orchestrator:
            _ORCHESTRATORS[self._get_param("ClusterName")] = orchestrator
        return original_create(self)

    def describe(self: Any) -> dict[str, Any]:
        result = original_describe(self)
        if self.cluster_name in _ORCHESTRATORS:
            result["Orchestrator"] = _ORCHESTRATORS[self.cluster_name]
        return result

    def describe_user_profile(self: SageMakerResponse) -> str:
        key = (self._get_param("DomainId"), self._get_param("UserProfileName"))
        if key not in USER_PROFILES:
            from moto.sagemaker.exceptions import ValidationError

            raise ValidationError(message=f"User profile {key[1]} does not exist")
        return json.dumps(USER_PROFILES[key])

    def describe_data_repository_associations(self: FSxResponse) -> str:
        filters = self._get_param("Filters") or []
        wanted = {
            value
            for f in filters
            if f.get("Name") == "file-system-id"
            for value in f.get("Values", [])
        }
        items = [
            a for fs, assoc in ASSOCIATIONS.items() if not wanted or fs in wanted for a in assoc
        ]
        return json.dumps({"Associations": items})

    original_fs_init = fsx_models.FileSystem.__init__

    def fs_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_fs_init(self, *args, **kwargs)
        # Real FSx for Lustre generates the mount name (`mount -t lustre dns@tcp:/<MountName>`).
        if self.file_system_type == "LUSTRE":
            self.lustre_configuration = {
                **(self.lustre_configuration or {}),
                "MountName": uuid.uuid4().hex[:8],
            }

    original_node_init = sagemaker_models.ClusterNode.__init__

    def node_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_node_init(self, *args, **kwargs)
        # HyperPod nodes are EC2 instances: `i-` and 17 hex digits (botocore's ClusterNodeId
        # pattern), not moto's `<group>-<n>`.
        self.instance_id = "i-" + uuid.uuid4().hex[:17]

    original_node_describe = sagemaker_models.ClusterNode.describe

    def node_describe(self: Any) -> dict[str, Any]:
        result = original_node_describe(self)
        n = int(self.instance_id[2:8], 16)
        ip, dns = NODE_ADDRESSES.get(
            self.instance_id,
            (f"10.1.{n % 250}.{n // 250 % 250 + 1}", f"ip-10-1-{n % 250}-{n // 250 % 250 + 1}"),
        )
        if "." not in dns:
            dns += f".{self.region_name}.compute.internal"
        return {**result, "PrivatePrimaryIp": ip, "PrivateDnsHostname": dns}

    def describe_cluster_node(self: Any, cluster_name: str, node_id: str) -> dict[str, Any]:
        from moto.sagemaker.exceptions import ValidationError

        cluster = self.clusters.get(cluster_name.rsplit("/", 1)[-1])
        for node in cluster.nodes.values() if cluster else []:
            if node.instance_id == node_id:
                return node.describe()  # type: ignore[no-any-return]
        raise ValidationError(message=f"Could not find node '{node_id}' in '{cluster_name}'.")

    def start_session(self: SSMResponse) -> str:
        from moto.ssm.exceptions import SSMException

        request = {key: self._get_param(key) for key in ("Target", "DocumentName", "Parameters")}
        if request["Target"] in SSM_DENIED:
            raise SSMException(
                "AccessDeniedException",
                f"User: arn:aws:sts::{ACCOUNT}:assumed-role/Studio/x is not authorized to perform: "
                f"ssm:StartSession on resource: {request['Target']}",
            )
        if request["Target"] in SSM_OFFLINE:
            raise SSMException("TargetNotConnected", f"{request['Target']} is not connected.")
        session_id = f"hyperpod-test-{uuid.uuid4().hex[:17]}"
        SSM_SESSIONS.append({**request, "SessionId": session_id})
        # StartSessionResponse: SessionId, TokenValue, StreamUrl (botocore's ssm model).
        return json.dumps(
            {
                "SessionId": session_id,
                "TokenValue": uuid.uuid4().hex,
                "StreamUrl": f"wss://ssmmessages.{REGION}.amazonaws.com/v1/data-channel/"
                f"{session_id}?role=publish_subscribe",
            }
        )

    sagemaker_models.ClusterNode.__init__ = node_init  # type: ignore[method-assign]
    sagemaker_models.ClusterNode.describe = node_describe  # type: ignore[method-assign]
    sagemaker_models.SageMakerModelBackend.describe_cluster_node = describe_cluster_node  # type: ignore[method-assign]
    SSMResponse.start_session = start_session  # type: ignore[attr-defined]
    fsx_models.FileSystem.__init__ = fs_init  # type: ignore[method-assign]
    SageMakerResponse.create_cluster = create_cluster  # type: ignore[method-assign]
    sagemaker_models.Cluster.describe = describe  # type: ignore[method-assign]
    SageMakerResponse.describe_user_profile = describe_user_profile  # type: ignore[attr-defined]
    FSxResponse.describe_data_repository_associations = describe_data_repository_associations  # type: ignore[attr-defined]
    # ClusterNode has no `arn`: moto's paginator then repeats its first token for ever.
    sagemaker_models.PAGINATION_MODEL["list_cluster_nodes"]["unique_attribute"] = "instance_id"


@pytest.fixture(scope="package")
def moto_server() -> Iterator[str]:
    _patch_moto()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Credentials and the endpoint for boto3 (AWS_ENDPOINT_URL), the state reset per test."""
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    import requests

    requests.post(f"{moto_server}/moto-api/reset", timeout=10)
    ASSOCIATIONS.clear()
    NODE_ADDRESSES.clear()
    SSM_SESSIONS.clear()
    SSM_OFFLINE.clear()
    SSM_DENIED.clear()
    USER_PROFILES.clear()
    _ORCHESTRATORS.clear()
    yield moto_server


def instance_group(name: str, count: int, instance_type: str = "ml.p5.48xlarge") -> dict[str, Any]:
    return {
        "InstanceCount": count,
        "InstanceGroupName": name,
        "InstanceType": instance_type,
        "LifeCycleConfig": {
            "SourceS3Uri": "s3://sagemaker-lifecycle/scripts/",
            "OnCreate": "on_create.sh",
        },
        "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/hyperpod",
        "ThreadsPerCore": 1,
    }


def create_eks_hyperpod(name: str, eks_name: str, groups: list[dict[str, Any]]) -> dict[str, str]:
    import boto3

    eks = boto3.client("eks")
    cluster = eks.create_cluster(
        name=eks_name,
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1"], "securityGroupIds": ["sg-1"]},
    )["cluster"]
    sagemaker = boto3.client("sagemaker")
    arn = sagemaker.create_cluster(
        ClusterName=name,
        InstanceGroups=groups,
        VpcConfig={"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
        Orchestrator={"Eks": {"ClusterArn": cluster["arn"]}},
    )["ClusterArn"]
    return {"arn": arn, "eks_arn": cluster["arn"]}


def create_slurm_hyperpod(name: str, groups: list[dict[str, Any]]) -> str:
    import boto3

    return boto3.client("sagemaker").create_cluster(
        ClusterName=name,
        InstanceGroups=groups,
        VpcConfig={"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
    )["ClusterArn"]
