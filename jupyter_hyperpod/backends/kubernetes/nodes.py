"""Kubernetes nodes as the panel shows them: readiness, HyperPod health labels, GPUs and EFA."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...core.models import GpuCount, Node

HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
DEEP_HEALTH_LABEL = "sagemaker.amazonaws.com/deep-health-check-status"
INSTANCE_GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
GPU_RESOURCES = ("nvidia.com/gpu", "aws.amazon.com/neurondevice")
EFA_RESOURCE = "vpc.amazonaws.com/efa"
GPU_PRODUCT_LABELS = ("nvidia.com/gpu.product",)
KEPT_LABEL_PREFIXES = (
    "sagemaker.amazonaws.com/",
    "topology.kubernetes.io/",
    "node.kubernetes.io/instance-type",
)

_UNHEALTHY_STATUS = {
    "Unschedulable": "HyperPod marked the node unschedulable",
    "UnschedulablePendingReplacement": "HyperPod is replacing the node",
    "UnschedulablePendingReboot": "HyperPod is rebooting the node",
}

_SUFFIXES = {
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "Ei": 1024**6,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "m": 10**-3,
}


def parse_quantity(value: Any) -> float:
    """A Kubernetes resource quantity ('96', '95500m', '1536Gi', '2e3') as a number."""
    if value is None:
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if not text:
        return 0.0
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * _SUFFIXES[suffix]
            except ValueError:
                return 0.0
    try:
        return float(text)
    except ValueError:
        return 0.0


def pod_requests(pod: dict[str, Any], resource: str) -> float:
    """What a pod holds of one resource: the sum over containers, at least the largest init container
    (extended resources: a limit without a request counts as the request)."""
    spec = pod.get("spec") or {}

    def amount(container: dict[str, Any]) -> float:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        return parse_quantity(requests.get(resource, limits.get(resource)))

    total = sum(amount(c) for c in spec.get("containers") or [])
    init = max((amount(c) for c in spec.get("initContainers") or []), default=0.0)
    return max(total, init)


def allocated_by_node(
    pods: Iterable[dict[str, Any]], resources: Iterable[str]
) -> dict[str, dict[str, float]]:
    """Per node, the requests of pods that hold resources (bound and not finished)."""
    wanted = list(resources)
    result: dict[str, dict[str, float]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        slot = result.setdefault(node, {})
        for resource in wanted:
            value = pod_requests(pod, resource)
            if value:
                slot[resource] = slot.get(resource, 0.0) + value
    return result


def _ready(conditions: list[dict[str, Any]]) -> tuple[bool | None, str | None]:
    for condition in conditions:
        if condition.get("type") == "Ready":
            status = condition.get("status")
            return status == "True", condition.get("message") or condition.get("reason")
    return None, None


def node_from_k8s(obj: dict[str, Any], allocated: dict[str, float] | None = None) -> Node:
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels: dict[str, str] = metadata.get("labels") or {}
    allocatable: dict[str, Any] = status.get("allocatable") or status.get("capacity") or {}
    allocated = allocated or {}

    ready, ready_message = _ready(status.get("conditions") or [])
    health_status = labels.get(HEALTH_LABEL)
    deep = labels.get(DEEP_HEALTH_LABEL)

    problems: list[str] = []
    health = "healthy"
    if ready is False:
        health = "unhealthy"
        problems.append(f"not ready: {ready_message}" if ready_message else "not ready")
    elif ready is None:
        health = "unknown"
        problems.append("no Ready condition reported")
    if health_status in _UNHEALTHY_STATUS:
        health = "unhealthy"
        problems.append(f"{HEALTH_LABEL}={health_status} ({_UNHEALTHY_STATUS[health_status]})")
    elif health_status and health_status != "Schedulable":
        if health == "healthy":
            health = "degraded"
        problems.append(f"{HEALTH_LABEL}={health_status}")
    if deep == "Failed":
        health = "unhealthy"
        problems.append("deep health check failed")
    elif deep == "InProgress":
        if health == "healthy":
            health = "degraded"
        problems.append("deep health check in progress")
    if spec.get("unschedulable"):
        if health == "healthy":
            health = "degraded"
        problems.append("cordoned (unschedulable)")

    if ready is False:
        state = "not-ready"
    elif spec.get("unschedulable"):
        state = "cordoned"
    elif ready is None:
        state = "unknown"
    else:
        state = "ready"

    gpu_resource = next((r for r in GPU_RESOURCES if parse_quantity(allocatable.get(r))), None)
    gpu_total = int(parse_quantity(allocatable.get(gpu_resource))) if gpu_resource else 0
    gpu_type = next((labels[key] for key in GPU_PRODUCT_LABELS if labels.get(key)), gpu_resource)
    instance_type = next((labels[key] for key in INSTANCE_TYPE_LABELS if labels.get(key)), None)

    return Node(
        name=metadata.get("name", "?"),
        state=state,
        health=health,  # type: ignore[arg-type]
        health_detail="; ".join(problems) or None,
        instance_type=instance_type,
        instance_group=labels.get(INSTANCE_GROUP_LABEL),
        cpus=int(parse_quantity(allocatable.get("cpu"))),
        memory_mb=int(parse_quantity(allocatable.get("memory")) / 1024**2),
        gpus=GpuCount(
            total=gpu_total,
            allocated=min(gpu_total, int(allocated.get(gpu_resource, 0))) if gpu_resource else 0,
            type=gpu_type,
        ),
        efa=int(parse_quantity(allocatable.get(EFA_RESOURCE))),
        partitions=[labels[INSTANCE_GROUP_LABEL]] if labels.get(INSTANCE_GROUP_LABEL) else [],
        labels={k: v for k, v in labels.items() if k.startswith(KEPT_LABEL_PREFIXES)},
    )
