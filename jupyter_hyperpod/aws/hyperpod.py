"""HyperPod clusters through the SageMaker API, EKS and Slurm alike."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..core.errors import HyperPodError
from .calls import call, describe_error, paginate


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else (str(value) if value else None)


def orchestrator_of(description: dict[str, Any]) -> dict[str, Any]:
    """EKS clusters carry Orchestrator.Eks.ClusterArn; Slurm clusters have no Orchestrator key."""
    eks = ((description.get("Orchestrator") or {}).get("Eks") or {}).get("ClusterArn")
    if eks:
        return {
            "orchestrator": "eks",
            "eks_cluster_arn": eks,
            "eks_cluster_name": eks.rsplit("/", 1)[-1],
        }
    return {"orchestrator": "slurm", "eks_cluster_arn": None, "eks_cluster_name": None}


def list_clusters(sagemaker: Any, *, describe: bool = True) -> list[dict[str, Any]]:
    """Every HyperPod cluster; with `describe`, its orchestrator (one failing describe does not
    hide the others)."""
    clusters: list[dict[str, Any]] = []
    for summary in paginate(sagemaker, "list_clusters", "ClusterSummaries", MaxResults=100):
        item: dict[str, Any] = {
            "name": summary.get("ClusterName"),
            "arn": summary.get("ClusterArn"),
            "status": summary.get("ClusterStatus"),
            "created": _iso(summary.get("CreationTime")),
            "orchestrator": None,
        }
        if describe:
            try:
                description = call(
                    sagemaker, "describe_cluster", ClusterName=item["arn"] or item["name"]
                )
                item.update(orchestrator_of(description))
            except HyperPodError as exc:
                item["error"] = describe_error(exc)
        clusters.append(item)
    return clusters


def describe_cluster(sagemaker: Any, name: str, *, with_nodes: bool = True) -> dict[str, Any]:
    description = call(sagemaker, "describe_cluster", ClusterName=name)
    result: dict[str, Any] = {
        "name": description.get("ClusterName"),
        "arn": description.get("ClusterArn"),
        "status": description.get("ClusterStatus"),
        "created": _iso(description.get("CreationTime")),
        "failure_message": description.get("FailureMessage") or None,
        **orchestrator_of(description),
        "instance_groups": [
            {
                "name": group.get("InstanceGroupName"),
                "instance_type": group.get("InstanceType"),
                "current_count": group.get("CurrentCount"),
                "target_count": group.get("TargetCount"),
                "threads_per_core": group.get("ThreadsPerCore"),
                "status": group.get("Status"),
            }
            for group in description.get("InstanceGroups") or []
        ],
    }
    if with_nodes:
        result["nodes"] = list_cluster_nodes(sagemaker, result["arn"] or name)
    return result


def list_cluster_nodes(sagemaker: Any, cluster: str) -> list[dict[str, Any]]:
    nodes = []
    for node in paginate(
        sagemaker, "list_cluster_nodes", "ClusterNodeSummaries", ClusterName=cluster, MaxResults=100
    ):
        status = node.get("InstanceStatus") or {}
        nodes.append(
            {
                "instance_id": node.get("InstanceId"),
                "instance_group": node.get("InstanceGroupName"),
                "instance_type": node.get("InstanceType"),
                "status": status.get("Status"),
                "message": status.get("Message") or None,
                "launched": _iso(node.get("LaunchTime")),
            }
        )
    return nodes


def find_by_eks_arn(sagemaker: Any, eks_arn: str) -> dict[str, Any] | None:
    for cluster in list_clusters(sagemaker):
        if cluster.get("eks_cluster_arn") == eks_arn:
            return cluster
    return None
