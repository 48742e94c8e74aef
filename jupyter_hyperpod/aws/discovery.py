"""What the extension finds out about its HyperPod cluster through AWS, and `connect`: making an EKS
HyperPod cluster the Kubernetes backend's current context."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Literal

from ..core.errors import HyperPodError, InvalidRequest
from . import eks as eks_mod
from . import fsx as fsx_mod
from . import hyperpod, studio
from .calls import describe_error, session

log = logging.getLogger(__name__)

EKS_ARN = re.compile(r"^arn:aws[a-z-]*:eks:([a-z0-9-]+):(\d+):cluster/(.+)$")
HYPERPOD_ARN = re.compile(r"^arn:aws[a-z-]*:sagemaker:([a-z0-9-]+):(\d+):cluster/(.+)$")
_CACHE: dict[tuple[Any, ...], tuple[float, dict[str, Any]]] = {}
CACHE_SECONDS = 300.0


def region_of(*names: str) -> str | None:
    for name in names:
        for pattern in (EKS_ARN, HYPERPOD_ARN):
            match = pattern.match(name or "")
            if match:
                return match.group(1)
    return None


def default_kubeconfig() -> str:
    env = os.environ.get("KUBECONFIG", "")
    if env:
        return env.split(os.pathsep)[0]
    return str(Path.home() / ".kube" / "config")


def connect(
    cluster: str,
    *,
    region: str | None = None,
    kubeconfig: str | None = None,
    namespace: str | None = None,
    auth: Literal["exec", "token"] = "exec",
    profile: str | None = None,
) -> dict[str, Any]:
    """Write a kubeconfig context for a HyperPod EKS cluster (by name or ARN) and make it current."""
    aws = session(region or region_of(cluster), profile)
    region = aws.region_name
    if not region:
        raise InvalidRequest("no AWS region: pass --region or set AWS_REGION", field="region")
    described = hyperpod.describe_cluster(aws.client("sagemaker"), cluster, with_nodes=False)
    if described["orchestrator"] != "eks":
        raise InvalidRequest(
            f"HyperPod cluster {described['name']} is orchestrated by Slurm, not EKS: connect "
            "--slurm makes this machine its login node (POST aws/connect with slurm: true)",
            field="cluster",
        )
    eks_name = described["eks_cluster_name"]
    eks_region = region_of(described["eks_cluster_arn"]) or region
    eks_info = eks_mod.describe_eks(aws.client("eks", region_name=eks_region), eks_name)
    token = None
    if auth == "token":
        token, _ = eks_mod.eks_token(aws.client("sts", region_name=eks_region), eks_name)
    path = kubeconfig or default_kubeconfig()
    context = eks_mod.write_kubeconfig(
        path,
        eks=eks_info,
        region=eks_region,
        auth=auth,
        token=token,
        namespace=namespace,
        profile=profile,
    )
    _CACHE.clear()
    return {
        "hyperpod_cluster": described["name"],
        "hyperpod_cluster_arn": described["arn"],
        "eks_cluster": eks_name,
        "eks_cluster_arn": eks_info["arn"],
        "endpoint": eks_info["endpoint"],
        "kubernetes_version": eks_info.get("version"),
        "context": context,
        "kubeconfig": path,
        "auth": auth,
    }


def cluster_details(
    *,
    hyperpod_cluster: str = "",
    context: str = "",
    region: str = "",
    fsx_file_system_id: str = "",
    shared_fs_root: str = "",
    studio_metadata_path: str = "",
) -> dict[str, Any]:
    """AWS facts for `GET cluster` (HyperPod cluster and FSx); {} when nothing points at AWS.
    Errors are reported in the result, never raised: the cluster view must still load."""
    fs_id = fsx_file_system_id or fsx_mod.file_system_id_from_path(shared_fs_root) or ""
    eks_match = EKS_ARN.match(context or "")
    in_studio = bool(studio_metadata_path) and os.path.exists(studio_metadata_path)
    if not (hyperpod_cluster or eks_match or fs_id or in_studio):
        return {}
    key = (hyperpod_cluster, context, region, fs_id, in_studio)
    cached = _CACHE.get(key)
    if cached and time.monotonic() - cached[0] < CACHE_SECONDS:
        return cached[1]
    details: dict[str, Any] = {}
    try:
        aws = session(region or region_of(hyperpod_cluster, context) or None)
        if hyperpod_cluster or eks_match:
            sagemaker = aws.client("sagemaker")
            try:
                found: dict[str, Any] | None
                if hyperpod_cluster:
                    found = hyperpod.describe_cluster(sagemaker, hyperpod_cluster, with_nodes=False)
                else:
                    match = hyperpod.find_by_eks_arn(sagemaker, context)
                    found = (
                        hyperpod.describe_cluster(sagemaker, match["arn"], with_nodes=False)
                        if match
                        else None
                    )
                if found:
                    details["hyperpod"] = {
                        k: found.get(k)
                        for k in (
                            "name",
                            "arn",
                            "status",
                            "orchestrator",
                            "eks_cluster_arn",
                            "instance_groups",
                        )
                        if k in found
                    }
            except HyperPodError as exc:
                details["hyperpod_error"] = describe_error(exc)
        if in_studio:
            # The user profile's FSx path is the user's partition (e.g. /Data-Scientist).
            details["studio"] = studio.studio_context(studio_metadata_path, aws.client("sagemaker"))
            fs_id = fs_id or (details["studio"] or {}).get("fsx_id") or ""
        if fs_id:
            try:
                details["fsx"] = fsx_mod.describe_fsx(aws.client("fsx"), fs_id)
            except HyperPodError as exc:
                details["fsx"] = {"id": fs_id, "error": describe_error(exc)}
    except HyperPodError as exc:
        details["aws_error"] = describe_error(exc)
    _CACHE[key] = (time.monotonic(), details)
    return details


def connect_slurm(
    cluster: str,
    *,
    region: str | None = None,
    profile: str | None = None,
    controller_group: str | None = None,
    slurm_conf: str | None = None,
) -> dict[str, Any]:
    """Make this machine a login node of a HyperPod Slurm cluster (`slurm_login.setup`), with
    boto3's SageMaker and SSM clients and this machine's programs."""
    from .slurm_login.node import LoginPaths
    from .slurm_login.runner import ProcessRunner
    from .slurm_login.setup import connect_slurm as setup
    from .slurm_login.ssm import SessionManager

    aws = session(region or region_of(cluster), profile)
    if not aws.region_name:
        raise InvalidRequest("no AWS region: pass --region or set AWS_REGION", field="region")
    runner = ProcessRunner()
    paths = LoginPaths.from_environment()
    if slurm_conf:
        paths = dataclasses.replace(paths, conf=slurm_conf)
    result = setup(
        cluster,
        sagemaker=aws.client("sagemaker"),
        ssm=SessionManager(aws.client("ssm"), runner, profile=profile or ""),
        runner=runner,
        region=aws.region_name,
        profile=profile,
        controller_group=controller_group,
        paths=paths,
    )
    _CACHE.clear()
    return result
