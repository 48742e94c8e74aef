"""The NVIDIA DCGM exporter's series in PromQL, and their answers as GPU figures.

Series (dcgm-exporter's default counters): DCGM_FI_DEV_GPU_UTIL (%), DCGM_FI_DEV_FB_USED and
DCGM_FI_DEV_FB_FREE (MiB), DCGM_FI_DEV_POWER_USAGE (W), DCGM_FI_DEV_GPU_TEMP (C),
DCGM_FI_DEV_XID_ERRORS (the last XID error code), labelled `Hostname`, `gpu`, `UUID`, `modelName`,
and `pod`/`namespace` when the exporter maps GPUs to Kubernetes pods.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..core.gpu_models import GpuDevice, GpuNode, GpuSeries, SeriesMetric

SERIES: dict[str, str] = {
    "DCGM_FI_DEV_GPU_UTIL": "utilization",
    "DCGM_FI_DEV_FB_USED": "memory_used_mb",
    "DCGM_FI_DEV_FB_FREE": "memory_free_mb",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_GPU_TEMP": "temperature_c",
    "DCGM_FI_DEV_XID_ERRORS": "xid_error",
}
JOB_SERIES: dict[str, SeriesMetric] = {
    "DCGM_FI_DEV_GPU_UTIL": "utilization",
    "DCGM_FI_DEV_FB_USED": "memory_used_mb",
}
UTIL = "DCGM_FI_DEV_GPU_UTIL"
NODE_LABEL = "Hostname"
POD_LABEL = "pod"


def _quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _names(series: Iterable[str]) -> str:
    return "__name__=~" + _quote("|".join(series))


def _node_matcher(nodes: list[str] | None, node_label: str) -> str:
    if not nodes:
        return ""
    return f"{node_label}=~{_quote('|'.join(re.escape(n) for n in nodes))}"


def metric_queries(
    nodes: list[str] | None = None, node_label: str = NODE_LABEL, pod_label: str = POD_LABEL
) -> dict[str, str]:
    """One instant query per series, every node in each (optionally some nodes only).

    `max by` keeps only the labels the figures need (the exporter adds a dozen, the scrape two
    more, and an aggregation drops `__name__`): the GPU's model, UUID and pod with its
    utilisation, the node and GPU index with every other series. Six small answers, asked at
    once, instead of one that names every series (bench/gpu_metrics)."""
    where = _node_matcher(nodes, node_label)
    queries = {}
    for name in SERIES:
        by = f"{node_label}, gpu"
        if name == UTIL:
            by += f", UUID, modelName, {pod_label}, namespace"
        queries[name] = f"max by ({by}) ({name}{{{where}}})"
    return queries


def nodes_query(
    nodes: list[str] | None = None, node_label: str = NODE_LABEL, pod_label: str = POD_LABEL
) -> str:
    """Every series in one instant query (`metric_queries` joined with `or`, `__name__` kept):
    what `GpuMetrics.nodes` asked before it split the query (bench/gpu_metrics' baseline)."""
    where = _node_matcher(nodes, node_label)
    others = [name for name in SERIES if name != UTIL]
    first = f"max by (__name__, {node_label}, gpu, UUID, modelName, {pod_label}, namespace) "
    first += f"({UTIL}{{{where}}})"
    rest = f"max by (__name__, {node_label}, gpu) ({{{', '.join(filter(None, [_names(others), where]))}}})"
    return f"{first} or {rest}"


def job_query(
    *,
    nodes: list[str] | None = None,
    pod_pattern: str | None = None,
    namespace: str | None = None,
    node_label: str = NODE_LABEL,
    pod_label: str = POD_LABEL,
) -> str:
    """The job's GPU series: its pods (Kubernetes pod mapping) or its nodes (Slurm, local)."""
    matchers = [_names(JOB_SERIES)]
    if pod_pattern:
        matchers.append(f"{pod_label}=~{_quote(pod_pattern)}")
        if namespace:
            matchers.append(f"namespace={_quote(namespace)}")
    elif nodes:
        matchers.append(f"{node_label}=~{_quote('|'.join(re.escape(n) for n in nodes))}")
    else:
        raise ValueError("a job query needs pods or nodes")
    return "{" + ", ".join(matchers) + "}"


def _number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return None if value != value else value  # NaN: no figure


def parse_nodes(
    data: dict[str, Any], node_label: str = NODE_LABEL, pod_label: str = POD_LABEL
) -> list[GpuNode]:
    """An instant vector of the SERIES (named by `__name__`) as nodes and their GPUs."""
    devices: dict[tuple[str, str], dict[str, Any]] = {}
    for item in data.get("result") or []:
        field = SERIES.get((item.get("metric") or {}).get("__name__", ""))
        if field is not None:
            _collect(devices, field, item, node_label, pod_label)
    return _nodes(devices)


def parse_metric_answers(
    answers: dict[str, dict[str, Any]], node_label: str = NODE_LABEL, pod_label: str = POD_LABEL
) -> list[GpuNode]:
    """The answers of `metric_queries` (series name -> instant vector) as nodes and GPUs."""
    devices: dict[tuple[str, str], dict[str, Any]] = {}
    for name, data in answers.items():
        field = SERIES[name]
        for item in data.get("result") or []:
            _collect(devices, field, item, node_label, pod_label)
    return _nodes(devices)


def same_gpus(answers: dict[str, dict[str, Any]], node_label: str = NODE_LABEL) -> bool:
    """Whether the utilisation and memory answers name the same GPUs (the exporter serves both
    for every GPU: a difference means the queries straddled a scrape). An exporter whose counters
    leave one of them out altogether is consistent too."""

    def gpus(name: str) -> set[tuple[str, str]]:
        return {
            (str(labels.get(node_label)), str(labels.get("gpu")))
            for item in (answers.get(name) or {}).get("result") or []
            if (labels := item.get("metric") or {})
        }

    util, memory = gpus(UTIL), gpus("DCGM_FI_DEV_FB_USED")
    return not util or not memory or util == memory


def _collect(
    devices: dict[tuple[str, str], dict[str, Any]],
    field: str,
    item: dict[str, Any],
    node_label: str,
    pod_label: str,
) -> None:
    labels = item.get("metric") or {}
    node = labels.get(node_label) or labels.get("instance")
    if not node:
        return
    gpu = str(labels.get("gpu", labels.get("minor_number", "0")))
    device = devices.get((node, gpu))
    if device is None:
        device = devices[(node, gpu)] = {"gpu": gpu, "uuid": None, "model": None}
    if labels.get("UUID"):
        device["uuid"] = labels["UUID"]
    if labels.get("modelName"):
        device["model"] = labels["modelName"]
    pod = labels.get(pod_label) or labels.get("exported_pod")
    if pod:
        device["pod"] = pod
        device["namespace"] = labels.get("namespace") or labels.get("exported_namespace")
    value = _number((item.get("value") or [None, None])[1])
    if value is not None:
        device[field] = value


def _nodes(devices: dict[tuple[str, str], dict[str, Any]]) -> list[GpuNode]:
    """Sorted by node and GPU index. The figures are numbers parsed here: the models are built
    without validating them again (thousands of GPUs per poll)."""
    by_node: dict[str, list[GpuDevice]] = {}
    for (node, _), fields in devices.items():
        free = fields.pop("memory_free_mb", None)
        used = fields.get("memory_used_mb")
        if used is not None and free is not None:
            fields["memory_total_mb"] = used + free
        if fields.get("xid_error") is not None:
            fields["xid_error"] = int(fields["xid_error"])
        by_node.setdefault(node, []).append(GpuDevice.model_construct(**fields))
    return [summarise(node, gpus) for node, gpus in sorted(by_node.items())]


def _gpu_key(device: GpuDevice) -> tuple[int, str]:
    return (int(device.gpu), "") if device.gpu.isdigit() else (1 << 30, device.gpu)


def summarise(node: str, gpus: list[GpuDevice]) -> GpuNode:
    gpus = sorted(gpus, key=_gpu_key)
    utils = [g.utilization for g in gpus if g.utilization is not None]
    used = [g.memory_used_mb for g in gpus if g.memory_used_mb is not None]
    total = [g.memory_total_mb for g in gpus if g.memory_total_mb is not None]
    return GpuNode.model_construct(
        node=node,
        gpus=gpus,
        utilization=sum(utils) / len(utils) if utils else None,
        memory_used_mb=sum(used) if used else None,
        memory_total_mb=sum(total) if total and len(total) == len(gpus) else None,
    )


def parse_series(data: dict[str, Any], node_label: str = NODE_LABEL) -> list[GpuSeries]:
    """A range matrix of the JOB_SERIES as one series per metric, node and GPU."""
    series: list[GpuSeries] = []
    for item in data.get("result") or []:
        labels = item.get("metric") or {}
        metric = JOB_SERIES.get(labels.get("__name__", ""))
        if metric is None:
            continue
        points = [
            (float(t), v) for t, raw in item.get("values") or [] if (v := _number(raw)) is not None
        ]
        series.append(
            GpuSeries(
                metric=metric,
                node=labels.get(node_label) or labels.get("instance"),
                gpu=labels.get("gpu"),
                points=points,
            )
        )
    series.sort(key=lambda s: (s.metric, s.node or "", _index(s.gpu)))
    return series


def _index(gpu: str | None) -> tuple[int, str]:
    return (int(gpu), "") if gpu and gpu.isdigit() else (1 << 30, gpu or "")
