"""What the REST API, the client and the panel show of GPUs: per node now, per job over time;
and where a job's GPUs are, as its backend tells it. Data only, in the ground: the API, the
backend interface and the client share it, the `gpu/` adapter fills it in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

GpuSource = Literal["prometheus", "amp", "grafana", "nvml", "nvidia-smi"]
SeriesMetric = Literal["utilization", "memory_used_mb", "power_w", "temperature_c"]


class GpuDevice(BaseModel):
    gpu: str = Field(description="GPU index on its node (DCGM label `gpu`)")
    uuid: str | None = None
    model: str | None = None
    utilization: float | None = Field(None, description="Percent busy (DCGM_FI_DEV_GPU_UTIL)")
    memory_used_mb: float | None = Field(None, description="MiB of frame buffer used")
    memory_total_mb: float | None = Field(None, description="MiB of frame buffer (used + free)")
    power_w: float | None = None
    temperature_c: float | None = None
    xid_error: int | None = Field(
        None, description="Last XID error code the driver reported (0: none)"
    )
    pod: str | None = Field(None, description="Pod using the GPU (Kubernetes pod mapping)")
    namespace: str | None = None


class GpuNode(BaseModel):
    node: str = Field(description="Node name, as in GET /nodes where the labels agree")
    gpus: list[GpuDevice]
    utilization: float | None = Field(None, description="Mean utilisation of the node's GPUs")
    memory_used_mb: float | None = None
    memory_total_mb: float | None = None


class GpuNodes(BaseModel):
    source: GpuSource | None = Field(None, description="Where the figures come from; None: none")
    time: float = Field(description="When they were read (seconds since the epoch)")
    nodes: list[GpuNode] = Field(default_factory=list)
    message: str | None = Field(None, description="Why no figures are shown, when none are")


class GpuSeries(BaseModel):
    metric: SeriesMetric
    node: str | None = None
    gpu: str | None = None
    points: list[tuple[float, float]] = Field(description="(time, value) pairs, oldest first")


class JobGpu(BaseModel):
    source: GpuSource | None = None
    start: float | None = None
    end: float | None = None
    step: float | None = Field(None, description="Seconds between points")
    series: list[GpuSeries] = Field(default_factory=list)
    message: str | None = Field(None, description="Why no series are shown, when none are")


@dataclass(frozen=True)
class GpuPlacement:
    """Where a job's GPUs are, as its backend knows it: what the GPU figures ask the metrics for."""

    nodes: tuple[str, ...] = ()
    """The job's nodes (DCGM's node label)."""
    gpus: dict[str, frozenset[str]] | None = None
    """Per node, the GPU indices the job holds there (DCGM's `gpu` label); None: every GPU of
    its nodes (whole nodes, or the backend does not know)."""
    pod_pattern: str | None = None
    """Kubernetes: a regular expression of the job's pod names (DCGM's pod label), instead of nodes."""
    namespace: str | None = None
    this_machine: bool = False
    """The GPUs are this server's own (the local backend): read them here when no endpoint is set."""
