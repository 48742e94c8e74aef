"""GPU figures for the service: from the configured Prometheus-compatible endpoint (DCGM exporter
series), else, on the local backend, from this machine's GPUs; else none, without an error.

Which GPUs are a job's: its pods on Kubernetes (dcgm-exporter's pod mapping: `pod`/`namespace`),
its nodes on Slurm (the job's node list, and on each the GPU indices Slurm gave it) and on the
local backend, over the job's run (start to end). DCGM on Slurm has no job label: the node is the
exporter's `Hostname` label, the host name, which on HyperPod Slurm is the Slurm node name
(`ip-10-1-2-3`: HyperPod's lifecycle scripts run dcgm-exporter with `--net host` on each compute
node and relabel `instance` to the same host name; awsome-distributed-training,
1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config/observability/).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.errors import HyperPodError
from ..core.gpu_models import GpuNodes, GpuPlacement, JobGpu
from ..core.models import Job, JobState
from . import dcgm
from .local import LocalGpus
from .prometheus import PrometheusClient
from .snapshot import Snapshot

MAX_POINTS = 300
CACHE_SECONDS = 5.0
"""How long one answer of `nodes()` serves every poller (the scrape interval is 15 s on
HyperPod); older ones are still served, for up to six times as long, while a new one loads."""
NO_SOURCE = (
    "no GPU metrics: set c.HyperPodSettings.gpu_metrics_url to the cluster's Prometheus, "
    "Amazon Managed Prometheus workspace or Grafana data source"
)


class GpuMetrics:
    def __init__(self, settings: Any) -> None:
        self.settings = settings
        url = str(getattr(settings, "gpu_metrics_url", "") or "")
        self.prometheus = (
            PrometheusClient(
                url,
                kind=str(getattr(settings, "gpu_metrics_kind", "auto")),
                token=str(getattr(settings, "gpu_metrics_token", "") or ""),
                region=str(getattr(settings, "gpu_metrics_region", "") or ""),
            )
            if url
            else None
        )
        self.node_label = str(getattr(settings, "gpu_metrics_node_label", "") or dcgm.NODE_LABEL)
        self.pod_label = str(getattr(settings, "gpu_metrics_pod_label", "") or dcgm.POD_LABEL)
        self._local: LocalGpus | None = None
        self._local_lock = threading.Lock()
        cache = getattr(settings, "gpu_metrics_cache_seconds", CACHE_SECONDS)
        self._nodes = Snapshot(self._nodes_from_prometheus, fresh=float(cache))
        self._pool: ThreadPoolExecutor | None = None

    def local(self) -> LocalGpus:
        """This machine's GPUs (probed once; the sampler starts with the first look)."""
        with self._local_lock:
            if self._local is None:
                prefer = str(getattr(self.settings, "gpu_local", "auto"))
                self._local = LocalGpus(prefer=prefer) if prefer != "off" else LocalGpus(prefer="")
                self._local.start()
            return self._local

    def close(self) -> None:
        if self._local is not None:
            self._local.stop()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    # -- now, per node -------------------------------------------------------------------------
    def nodes(self, *, this_machine: bool) -> GpuNodes:
        """Every node's GPUs now; without an endpoint, this machine's when they are the
        cluster's (`Orchestrator.jobs_run_here`)."""
        if self.prometheus is not None:
            return self._nodes.get()  # one answer for every poller (gpu/snapshot.py)
        now = time.time()
        if this_machine:
            local = self.local()
            if local.available:
                devices = local.read()
                return GpuNodes(
                    source=local.source,
                    time=now,
                    nodes=[dcgm.summarise(socket.gethostname(), devices)] if devices else [],
                )
            return GpuNodes(time=now, message="no NVIDIA GPU on this machine")
        return GpuNodes(time=now, message=NO_SOURCE)

    def _nodes_from_prometheus(self) -> GpuNodes:
        """Every node's GPUs now: one query per series for all nodes, all asked at once."""
        assert self.prometheus is not None
        now = time.time()
        queries = dcgm.metric_queries(node_label=self.node_label, pod_label=self.pod_label)
        with self._local_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(len(queries), thread_name_prefix="promql")
            pool = self._pool
        try:
            answers = self._ask(pool, queries, now)
            if not dcgm.same_gpus(answers, self.node_label):
                # A scrape landed between the queries (GPUs came or went): ask again, once.
                now = time.time()
                answers = self._ask(pool, queries, now)
        except HyperPodError as error:
            return GpuNodes(source=self.prometheus.kind, time=now, message=error.message)
        found = dcgm.parse_metric_answers(answers, self.node_label, self.pod_label)
        return GpuNodes(
            source=self.prometheus.kind,
            time=now,
            nodes=found,
            message=None if found else "the endpoint has no DCGM exporter series",
        )

    def _ask(
        self, pool: ThreadPoolExecutor, queries: dict[str, str], at: float
    ) -> dict[str, dict[str, Any]]:
        """Every query at once, all evaluated at the same instant `at`."""
        assert self.prometheus is not None
        client = self.prometheus
        answers = pool.map(lambda promql: client.query(promql, time=at), queries.values())
        return dict(zip(queries, answers, strict=True))

    # -- over time, per job --------------------------------------------------------------------
    def job(self, job: Job, placement: GpuPlacement, *, step: float | None = None) -> JobGpu:
        """The job's GPUs over its run, where its backend placed them."""
        if job.started is None or job.state == JobState.PENDING:
            return JobGpu(message="the job has not started")
        start = job.started
        end = job.ended or time.time()
        end = max(end, start + 1)
        step = step or max(1.0, math.ceil((end - start) / MAX_POINTS))
        if self.prometheus is not None:
            return self._job_from_prometheus(placement, start, end, step)
        if placement.this_machine:
            local = self.local()
            if not local.available:
                return JobGpu(message="no NVIDIA GPU on this machine")
            host = socket.gethostname()
            held = (placement.gpus or {}).get(host)
            series = local.series(host, start, end, sorted(held) if held else None)
            return JobGpu(
                source=local.source,
                start=start,
                end=end,
                step=local.interval,
                series=series,
                message=None if series else "no GPU samples in the job's time yet",
            )
        return JobGpu(message=NO_SOURCE)

    def _job_from_prometheus(
        self, placement: GpuPlacement, start: float, end: float, step: float
    ) -> JobGpu:
        assert self.prometheus is not None
        source = self.prometheus.kind
        if placement.pod_pattern:
            query = dcgm.job_query(
                pod_pattern=placement.pod_pattern,
                namespace=placement.namespace,
                pod_label=self.pod_label,
            )
        else:
            if not placement.nodes:
                return JobGpu(source=source, message="the job's nodes are not known yet")
            query = dcgm.job_query(nodes=list(placement.nodes), node_label=self.node_label)
        try:
            answer = self.prometheus.query_range(query, start=start, end=end, step=step)
        except HyperPodError as error:
            return JobGpu(source=source, start=start, end=end, step=step, message=error.message)
        series = dcgm.parse_series(answer, self.node_label)
        held = placement.gpus
        if held:  # on a node the job shares, only its own GPUs
            series = [one for one in series if one.node not in held or one.gpu in held[one.node]]
        return JobGpu(
            source=source,
            start=start,
            end=end,
            step=step,
            series=series,
            message=None if series else "no DCGM series for this job's GPUs",
        )

    # -- doctor ---------------------------------------------------------------------------------
    def check(self, *, this_machine: bool) -> tuple[str, str, str]:
        """(status, detail, fix) for `doctor`."""
        if self.prometheus is not None:
            where = f"{self.prometheus.kind} at {self.prometheus.url}"
            try:
                data = self.prometheus.query("count(DCGM_FI_DEV_GPU_UTIL)")
            except HyperPodError as error:
                return (
                    "fail",
                    error.message,
                    "fix c.HyperPodSettings.gpu_metrics_url (and its auth)",
                )
            result = data.get("result") or []
            count = int(float(result[0]["value"][1])) if result else 0
            if not count:
                return (
                    "warn",
                    f"{where} answers but has no DCGM_FI_DEV_GPU_UTIL series",
                    "install the DCGM exporter and let Prometheus scrape it",
                )
            return "pass", f"{where}: {count} GPU(s) reporting", ""
        if this_machine:
            local = self.local()
            if local.available:
                return "pass", f"{len(local.read())} local GPU(s) read with {local.source}", ""
            return "skip", "no NVIDIA GPU on this machine", ""
        return (
            "skip",
            "no GPU metrics endpoint configured",
            "set c.HyperPodSettings.gpu_metrics_url",
        )


def check_gpu(settings: Any, *, this_machine: bool) -> tuple[str, str, str]:
    """The doctor's GPU metrics check: (status, detail, fix)."""
    metrics = GpuMetrics(settings)
    try:
        return metrics.check(this_machine=this_machine)
    finally:
        metrics.close()
