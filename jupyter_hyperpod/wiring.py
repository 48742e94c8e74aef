"""The composition root: the adapters a `HyperPodService` is built with (`core/adapters.py`).

The server extension (`app.py`), the CLI standalone (`cli/session.py`) and `doctor` pass a
`Wiring()`; a service built without one gets it by its import string. Each adapter module is
imported when it is first used, so that an optional library (boto3, mlflow, NVML) is only
needed by what uses it, and a test that patches a module's function patches what is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .core.adapters import GpuReader
    from .core.backend import Orchestrator
    from .core.models import JobMetrics, JobProgress
    from .core.partition import Partition
    from .core.settings import HyperPodSettings
    from .core.snapshot import Snapshotter


class AwsAdapter:
    """`core.adapters.Aws` with `aws/` (boto3)."""

    def default_region(self) -> str | None:
        from .aws.calls import session

        return session().region_name  # type: ignore[no-any-return]

    def region_of(self, cluster: str) -> str | None:
        from .aws import discovery

        return discovery.region_of(cluster)

    def default_kubeconfig(self) -> str:
        from .aws import discovery

        return discovery.default_kubeconfig()

    def list_clusters(self, region: str) -> list[dict[str, Any]]:
        from .aws import hyperpod
        from .aws.calls import session

        return hyperpod.list_clusters(session(region).client("sagemaker"))

    def connect(
        self,
        cluster: str,
        *,
        region: str,
        kubeconfig: str,
        namespace: str | None,
        auth: Literal["exec", "token"],
    ) -> dict[str, Any]:
        from .aws import discovery

        return discovery.connect(
            cluster, region=region, kubeconfig=kubeconfig, namespace=namespace, auth=auth
        )

    def connect_slurm(
        self, cluster: str, *, region: str, controller_group: str | None
    ) -> dict[str, Any]:
        from .aws import discovery

        return discovery.connect_slurm(cluster, region=region, controller_group=controller_group)


class ProgressAdapter:
    """`core.adapters.Progress` with `progress.py`."""

    @property
    def tail_lines(self) -> int:
        from .progress import TAIL_LINES

        return TAIL_LINES

    def of_log(self, text: str, *, started: float | None) -> JobProgress | None:
        from .progress import progress_of_log

        return progress_of_log(text, started=started)

    def from_mlflow(
        self, tracking_uri: str | None, job_id: str, *, started: float | None
    ) -> JobProgress | None:
        from .progress import progress_from_mlflow

        return progress_from_mlflow(tracking_uri, job_id, started=started)


class Wiring:
    """`core.adapters.Adapters`: the backends, AWS, MLflow, GPU metrics and progress of this
    package."""

    def __init__(self) -> None:
        self.aws = AwsAdapter()
        self.progress = ProgressAdapter()

    def orchestrator(self, settings: HyperPodSettings) -> Orchestrator:
        from .backends import create_orchestrator

        return create_orchestrator(settings.orchestrator, settings)

    def gpu(self, settings: HyperPodSettings) -> GpuReader:
        from .gpu import GpuMetrics

        return GpuMetrics(settings)

    def check_gpu(self, settings: HyperPodSettings, *, this_machine: bool) -> tuple[str, str, str]:
        from .gpu.reader import check_gpu

        return check_gpu(settings, this_machine=this_machine)

    def job_metrics(self, tracking_uri: str | None, job_id: str) -> JobMetrics:
        from .metrics import read_job_metrics

        return read_job_metrics(tracking_uri, job_id)

    def snapshotter(self, settings: HyperPodSettings, partition: Partition) -> Snapshotter:
        from .core.freeze import PROCESS_FREEZE
        from .core.snapshot import Snapshotter

        # One cache for every service of the process (a server, its CLI calls, each test's):
        # pip freeze runs once per interpreter and state of its site-packages.
        return Snapshotter(
            partition,
            max_bytes=settings.snapshot_max_bytes,
            reference_bytes=settings.snapshot_reference_bytes,
            freeze=PROCESS_FREEZE,
        )

    def __repr__(self) -> str:
        return "Wiring()"


__all__ = ["AwsAdapter", "ProgressAdapter", "Wiring"]

if TYPE_CHECKING:  # the protocols are met (checked by mypy)
    from .core.adapters import Adapters, Aws, Progress

    _adapters: Adapters = Wiring()
    _aws: Aws = AwsAdapter()
    _progress: Progress = ProgressAdapter()
