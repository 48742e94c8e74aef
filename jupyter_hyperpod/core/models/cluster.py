"""The cluster as a client sees it: nodes, capabilities, the shared file system, the Kubernetes
watch cache, and the AWS clusters a server can connect to."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .common import StrictModel


class GpuCount(BaseModel):
    total: int = 0
    allocated: int = 0
    type: str | None = Field(
        None, description="GPU model or GRES type, e.g. 'a100' or 'nvidia.com/gpu'"
    )


class Node(BaseModel):
    name: str
    state: str = Field(
        description="Orchestrator state: idle, mixed, allocated, drained, down, ready, not-ready..."
    )
    health: Literal["healthy", "degraded", "unhealthy", "unknown"] = "unknown"
    health_detail: str | None = Field(
        None, description="Why the node is not healthy (drain reason, health label)"
    )
    instance_type: str | None = None
    instance_group: str | None = None
    cpus: int = 0
    memory_mb: int = 0
    gpus: GpuCount = Field(default_factory=GpuCount)
    efa: int = 0
    partitions: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)


class Capabilities(BaseModel):
    """What the configured backend can do, so that clients hide what it cannot."""

    cancel: bool = True
    follow_logs: bool = True
    per_rank_logs: bool = True
    metrics: bool = True
    multi_node: bool = False
    gpus: bool = False
    job_kinds: list[str] = Field(default_factory=list, description="Kubernetes job kinds accepted")
    render_format: Literal["command", "sbatch", "manifest"] = "command"
    aws_connect: bool = Field(
        False, description="The server can list HyperPod clusters and connect to one (has boto3)"
    )


class FileSystemInfo(BaseModel):
    root: str = Field(description="Where the shared file system is mounted on this (IDE) machine")
    cluster_root: str = Field(description="Where the cluster's jobs see the same file system")
    partition: str = Field(description="The user's partition, absolute on this machine")
    partition_mode: str
    contents_path: str | None = Field(
        None,
        description="The partition as a JupyterLab contents path, when it is inside the server root",
    )
    fsx: dict[str, Any] | None = Field(
        None, description="FSx for Lustre details when discovered through AWS"
    )


class WatchedResource(BaseModel):
    """One resource of a watch cache (list once, then watch from the list's version)."""

    synced: bool = Field(description="Listed at least once: the memory holds the resource")
    connected: bool = Field(description="Its watch is open: the memory follows the API's events")
    stale_s: float | None = Field(
        None, description="Seconds the watch has been cut (0 while connected; null before a list)"
    )
    last_list_age_s: float | None = Field(None, description="Seconds since the last full list")
    last_event_age_s: float | None = Field(
        None, description="Seconds since the last watch event (bookmarks included)"
    )
    resource_version: str = Field("", description="The version the watch resumes from")
    items: int = Field(0, description="Objects in memory")
    relists: int = Field(0, description="Full lists made, the first included")
    expired: int = Field(
        0, description="Watches the API server ended with 410 Gone (each cost a full list)"
    )
    error: str | None = Field(None, description="Why the last list or watch failed")


class WatchCacheStatus(BaseModel):
    """The Kubernetes backend's watch cache of nodes and pods (and of the warning events of
    the namespaces where a job of ours waits): while `fresh`, requests are answered from
    memory; otherwise they list from the API server directly."""

    enabled: bool = Field(description="c.KubernetesOrchestrator.watch_cache")
    started: bool = Field(description="Started by the first read that needs it")
    fresh: bool = Field(description="Every resource synced and watched: reads come from memory")
    nodes: WatchedResource
    pods: WatchedResource
    warning_events: dict[str, WatchedResource] = Field(
        default_factory=dict,
        description="By namespace: its warning events, watched while a job of ours there waits "
        "or failed (they explain it); not part of `fresh`: a namespace not watched, or not "
        "synced, is listed by each refresh",
    )


class ClusterInfo(BaseModel):
    orchestrator: str = Field(
        description="The backend's kind: local, slurm, kubernetes, or a third party's own name"
    )
    name: str
    user: str
    filesystem: FileSystemInfo
    capabilities: Capabilities
    mlflow_uri: str | None = None
    default_template: str | None = None
    details: dict[str, Any] = Field(
        default_factory=dict, description="Backend-specific facts (AWS cluster ARN...)"
    )
    watch_cache: WatchCacheStatus | None = Field(
        None, description="The Kubernetes watch cache; null on backends without one"
    )


class AwsCluster(BaseModel):
    name: str
    arn: str | None = None
    status: str | None = None
    orchestrator: Literal["eks", "slurm"] | None = Field(
        None, description="None when the cluster could not be described (see error)"
    )
    eks_cluster_arn: str | None = None
    connectable: bool = Field(description="An EKS cluster this server can switch to")
    reason: str | None = Field(None, description="Why the cluster is not connectable")


class AwsClusterList(BaseModel):
    region: str
    clusters: list[AwsCluster]


class AwsConnectRequest(StrictModel):
    cluster: str = Field(min_length=1, description="HyperPod cluster name or ARN")
    region: str | None = Field(None, description="Default: the server's AWS region")
    namespace: str | None = Field(None, description="Namespace of the new kubeconfig context")
    auth: Literal["exec", "token"] = Field(
        "exec",
        description="exec: the context refreshes its EKS token by itself (python -m "
        "jupyter_hyperpod.aws token); token: a 15-minute token written into the kubeconfig",
    )
    slurm: bool = Field(
        False,
        description="A Slurm cluster: make the server's machine its login node (slurm.conf, the "
        "munge key over SSM, munged, sinfo checked) and switch to the slurm orchestrator",
    )
    controller_group: str | None = Field(
        None,
        description="Slurm: the instance group of the controllers (default: the one group "
        "named like 'controller' or 'head')",
    )
