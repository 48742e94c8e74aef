"""The Slurm controllers of a HyperPod cluster, through the SageMaker API (boto3 client passed in):
`DescribeCluster` for its ARN (the cluster id of SSM targets) and instance groups,
`ListClusterNodes` for the controller group's nodes, `DescribeClusterNode` for each one's
`PrivatePrimaryIp` and `PrivateDnsHostname` (botocore's sagemaker model, `ClusterNodeDetails`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.errors import InvalidRequest, NotFound
from .. import hyperpod
from ..calls import call, paginate

RUNNING = "Running"


@dataclass(frozen=True)
class Controller:
    instance_id: str
    group: str
    ip: str
    hostname: str
    """The host's short name (`ip-10-1-2-3`): slurmctld compares SlurmctldHost with it."""
    status: str

    def ssm_target(self, cluster_id: str) -> str:
        """How Session Manager names a HyperPod node (AWS's hyperpod-ssm skill)."""
        return f"sagemaker-cluster:{cluster_id}_{self.group}-{self.instance_id}"


@dataclass(frozen=True)
class SlurmCluster:
    name: str
    arn: str
    cluster_id: str
    controllers: list[Controller]


def controller_group(groups: list[str], wanted: str | None) -> str:
    """The instance group of the controllers: `wanted`, or the one group named like one."""
    if wanted:
        if wanted not in groups:
            raise InvalidRequest(
                f"the cluster has no instance group '{wanted}' (groups: {', '.join(groups)})",
                field="controller_group",
            )
        return wanted
    found = [g for g in groups if "controller" in g.lower() or "head" in g.lower()]
    if len(found) == 1:
        return found[0]
    raise InvalidRequest(
        "which instance group runs slurmctld? "
        + (f"several look like it: {', '.join(found)}" if found else "none is named like one")
        + f" (groups: {', '.join(groups)}); pass --controller-group GROUP",
        field="controller_group",
    )


def short_name(dns: str) -> str:
    """`ip-10-1-2-3.ec2.internal` / `ip-10-1-2-3.us-west-2.compute.internal` -> `ip-10-1-2-3`."""
    return dns.split(".", 1)[0]


def find_controllers(sagemaker: Any, cluster: str, *, group: str | None = None) -> SlurmCluster:
    described = hyperpod.describe_cluster(sagemaker, cluster, with_nodes=False)
    if described["orchestrator"] != "slurm":
        raise InvalidRequest(
            f"HyperPod cluster {described['name']} is orchestrated by EKS, not Slurm: connect to "
            "it without --slurm (it writes a kubeconfig context)",
            field="cluster",
        )
    arn = described["arn"] or ""
    groups = [g["name"] for g in described["instance_groups"] if g.get("name")]
    chosen = controller_group(groups, group)
    controllers: list[Controller] = []
    for node in paginate(
        sagemaker,
        "list_cluster_nodes",
        "ClusterNodeSummaries",
        ClusterName=arn or cluster,
        InstanceGroupNameContains=chosen,
        MaxResults=100,
    ):
        # The filter matches substrings: `controller` also finds `controller-2`.
        if node.get("InstanceGroupName") != chosen:
            continue
        instance = str(node.get("InstanceId") or "")
        details: dict[str, Any] = call(
            sagemaker, "describe_cluster_node", ClusterName=arn or cluster, NodeId=instance
        ).get("NodeDetails", {})
        ip = details.get("PrivatePrimaryIp") or ""
        dns = details.get("PrivateDnsHostname") or ""
        status = str((details.get("InstanceStatus") or {}).get("Status") or "")
        if not ip or not dns:
            raise NotFound(
                f"controller {instance} has no private address yet (status {status or '?'}): "
                "wait until the node is Running"
            )
        controllers.append(Controller(instance, chosen, ip, short_name(dns), status))
    if not any(c.status == RUNNING for c in controllers):
        states = ", ".join(f"{c.instance_id} {c.status}" for c in controllers) or "no nodes"
        raise NotFound(
            f"no Running controller in instance group '{chosen}' ({states}): the cluster is not "
            "ready, or the group is not the controllers' (--controller-group)"
        )
    # Running controllers first: the first SlurmctldHost is the primary a client asks first.
    controllers.sort(key=lambda c: c.status != RUNNING)
    return SlurmCluster(described["name"], arn, arn.rsplit("/", 1)[-1], controllers)
