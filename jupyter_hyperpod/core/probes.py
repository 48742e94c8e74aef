"""What the cluster around the jobs says: the login-node diagnosis (the backend's checks, AWS,
MLflow, the GPU metrics) and the GPU metrics of the nodes and of a job (DCGM series in
Prometheus/AMP/Grafana; NVML or nvidia-smi locally)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from .adapters import Adapters, GpuReader
from .api import Diagnosis, DiagnosticCheck
from .connection import Connection
from .errors import InvalidRequest
from .jobbook import JobBook
from .partition import Partition
from .paths import ClusterPaths
from .settings import HyperPodSettings

if TYPE_CHECKING:
    from .gpu_models import GpuNodes, JobGpu


class ClusterProbes:
    """`served`: whether this core runs in the Jupyter server (else in a CLI or kernel);
    `refresh`: refresh the job states now (a finished job's GPU series end at its end)."""

    def __init__(
        self,
        settings: HyperPodSettings,
        connection: Connection,
        book: JobBook,
        partition: Partition,
        paths: ClusterPaths,
        adapters: Adapters,
        *,
        served: Callable[[], bool],
        refresh: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.connection = connection
        self.book = book
        self.partition = partition
        self.paths = paths
        self.adapters = adapters
        self.served = served
        self.refresh = refresh
        self.reader: GpuReader | None = None
        """The GPU metrics reader once made (`gpu`)."""

    def diagnose(self) -> Diagnosis:
        """The login-node checks of the orchestrator in use, run where this core runs: what it
        uses (orchestrator, file system root, partition: the words of `GET cluster`), then the
        backend's own checks (`Orchestrator.diagnose`), AWS, MLflow and the GPU metrics."""
        from .diagnose import login_node_checks  # its imports cost a CLI start: only here

        orchestrator = self.connection.orchestrator
        kind = orchestrator.kind
        checks = login_node_checks(
            self.settings,
            kind=kind,
            traits=orchestrator,
            fs_root=self.connection.fs_root,
            partition=self.partition.root,
            mlflow_uri=self.paths.mlflow_uri_for_server(),
            backend=orchestrator.diagnose,
            extra=[("GPU metrics", self.gpu_check)],
        )
        where = "the Jupyter server" if self.served() else "this process"
        return Diagnosis(
            ok=all(check.status != "fail" for check in checks),
            orchestrator=kind,
            where=f"{where} (pid {os.getpid()}, user {self.settings.user})",
            checks=checks,
        )

    def gpu_check(self) -> DiagnosticCheck:
        """The GPU metrics endpoint answers PromQL and has DCGM series (or the local GPUs read)."""
        status, detail, fix = self.adapters.check_gpu(
            self.settings, this_machine=self.connection.orchestrator.jobs_run_here
        )
        return DiagnosticCheck.model_validate(
            {"name": "GPU metrics", "status": status, "detail": detail, "fix": fix}
        )

    @property
    def gpu(self) -> GpuReader:
        """The GPU metrics reader, made on first use."""
        if self.reader is None:
            self.reader = self.adapters.gpu(self.settings)
        return self.reader

    def gpu_nodes(self) -> GpuNodes:
        """Each node's GPUs now; no source: none, with the reason."""
        return self.gpu.nodes(this_machine=self.connection.orchestrator.jobs_run_here)

    def job_gpu(self, job_id: str, *, step: float | None = None) -> JobGpu:
        """The job's GPU utilisation and memory over its run."""
        if step is not None and not 1 <= step <= 3600:
            raise InvalidRequest("step must be between 1 and 3600 seconds", field="step")
        job, data = self.book.get(job_id)
        if not job.state.finished:
            self.refresh()
            job, data = self.book.get(job_id)
        placement = self.connection.orchestrator.gpu_placement(job, data)
        return self.gpu.job(job, placement, step=step)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
