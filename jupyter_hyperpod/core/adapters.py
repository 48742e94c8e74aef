"""What the service needs from above the ground, as small protocols: the composition root
(`jupyter_hyperpod/wiring.py`, used by the server extension, the CLI and `doctor`) gives the
service an `Adapters` that builds the backend and reaches AWS, MLflow, the GPU metrics and the
progress parser. Core never imports them; a service built without one looks up the default
composition root by its import string (as backends are looked up by theirs, `core/registry.py`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from .backend import Orchestrator
    from .gpu_models import GpuNodes, GpuPlacement, JobGpu
    from .models import Job, JobMetrics, JobProgress
    from .partition import Partition
    from .settings import HyperPodSettings
    from .snapshot import Snapshotter

DEFAULT_ADAPTERS = "jupyter_hyperpod.wiring:Wiring"
"""The composition root a service uses when it is given none (`module:Class`)."""


class GpuReader(Protocol):
    """Each node's GPUs and a job's GPU use (`gpu.GpuMetrics`)."""

    def nodes(self, *, this_machine: bool) -> GpuNodes: ...

    def job(self, job: Job, placement: GpuPlacement, *, step: float | None = None) -> JobGpu: ...

    def close(self) -> None: ...


class Aws(Protocol):
    """The HyperPod clusters of a region and the kubeconfig context of one (`aws/`)."""

    def default_region(self) -> str | None:
        """The region of the AWS configuration ($AWS_REGION, the profile), if any."""
        ...

    def region_of(self, cluster: str) -> str | None:
        """The region an ARN names, if it is one."""
        ...

    def default_kubeconfig(self) -> str: ...

    def list_clusters(self, region: str) -> list[dict[str, Any]]:
        """sagemaker:ListClusters and DescribeCluster of each (`aws.hyperpod.list_clusters`)."""
        ...

    def connect(
        self,
        cluster: str,
        *,
        region: str,
        kubeconfig: str,
        namespace: str | None,
        auth: Literal["exec", "token"],
    ) -> dict[str, Any]:
        """Write the kubeconfig context of an EKS cluster (`aws.discovery.connect`)."""
        ...

    def connect_slurm(
        self, cluster: str, *, region: str, controller_group: str | None
    ) -> dict[str, Any]:
        """Make this machine a login node of a Slurm cluster (`aws.discovery.connect_slurm`):
        its `slurm_conf`, `steps`, `controllers`; a failure names its step."""
        ...


class Progress(Protocol):
    """How far a running job is: from the last lines of its log, or from its MLflow run."""

    @property
    def tail_lines(self) -> int:
        """How many of the log's last lines `of_log` needs."""
        ...

    def of_log(self, text: str, *, started: float | None) -> JobProgress | None: ...

    def from_mlflow(
        self, tracking_uri: str | None, job_id: str, *, started: float | None
    ) -> JobProgress | None: ...


class Adapters(Protocol):
    """Everything the service is given by its composition root."""

    @property
    def aws(self) -> Aws: ...

    @property
    def progress(self) -> Progress: ...

    def orchestrator(self, settings: HyperPodSettings) -> Orchestrator:
        """The configured backend (`orchestrator_class`, or by name; `auto` detected)."""
        ...

    def gpu(self, settings: HyperPodSettings) -> GpuReader: ...

    def check_gpu(self, settings: HyperPodSettings, *, this_machine: bool) -> tuple[str, str, str]:
        """(status, detail, fix) of the GPU metrics source, for `diagnose`."""
        ...

    def job_metrics(self, tracking_uri: str | None, job_id: str) -> JobMetrics:
        """The MLflow run of a job (`metrics.read_job_metrics`)."""
        ...

    def snapshotter(self, settings: HyperPodSettings, partition: Partition) -> Snapshotter:
        """What takes a job's snapshot at submit (`core/snapshot.py`)."""
        ...


def default_adapters() -> Adapters:
    """The default composition root, imported by its name (core imports nothing above it)."""
    module, _, name = DEFAULT_ADAPTERS.partition(":")
    found: Adapters = getattr(importlib.import_module(module), name)()
    return found
