"""GPU utilisation of the cluster's nodes and jobs (DCGM exporter series in Prometheus, AMP or
Grafana; NVML or nvidia-smi on the local backend)."""

from .reader import GpuMetrics

__all__ = ["GpuMetrics"]
