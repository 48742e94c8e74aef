"""The Jupyter server extension: configuration, the service (with its status tracker), the routes."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jupyter_server.extension.application import ExtensionApp

from .agent.http import MCP_ROUTE, McpEndpoint, McpHandler
from .byo_handlers import ApplyHandler
from .chain_handlers import ChainsHandler, JobChainHandler, JobResumeHandler
from .core.feed import JobFeed
from .core.logprotocol import JobLooks
from .core.models import JobState
from .core.service import HyperPodService
from .core.settings import HyperPodSettings
from .feed_handlers import JobFeedHandler
from .gpu import GpuMetrics
from .handlers import (
    JOB_ID,
    OTHER_ID,
    AwsClustersHandler,
    AwsConnectHandler,
    ClusterHandler,
    CompareHandler,
    DiagnoseHandler,
    FilesHandler,
    FileTextHandler,
    GpuNodesHandler,
    JobDiffHandler,
    JobEventsHandler,
    JobGpuHandler,
    JobHandler,
    JobRerunHandler,
    JobsHandler,
    LogsHandler,
    LogStreamHandler,
    MetricsHandler,
    NodesHandler,
    NotFoundHandler,
    OpenAPIHandler,
    RenderHandler,
    StacksHandler,
    TemplatesHandler,
)
from .queue_handlers import QueueAdoptHandler, QueueHandler, QueueLogsHandler
from .sweep_handlers import SWEEP_ID, SweepCancelHandler, SweepHandler, SweepsHandler
from .wiring import Wiring

API = "hyperpod/api"

POOLS: dict[str, int] = {
    "api": 8,
    "backend": 8,
    "cancel": 8,
    "logs": 16,
}
"""Worker threads per kind of blocking work (`ServiceMixin.run_in`): `api` answers from the store
and the file system, `backend` calls the orchestrator (nodes, submit, render, metrics, AWS),
`cancel` waits for jobs to stop (up to the grace period each), `logs` reads followed logs. A kind
that is slow fills its own pool, never the API's."""

ROUTES: list[tuple[str, type]] = [
    (f"{API}/openapi.json", OpenAPIHandler),
    (f"{API}/cluster", ClusterHandler),
    (f"{API}/diagnose", DiagnoseHandler),
    (f"{API}/nodes", NodesHandler),
    (f"{API}/aws/clusters", AwsClustersHandler),
    (f"{API}/aws/connect", AwsConnectHandler),
    (f"{API}/files", FilesHandler),
    (f"{API}/files/text", FileTextHandler),
    (f"{API}/templates", TemplatesHandler),
    (f"{API}/jobs/render", RenderHandler),
    (f"{API}/jobs/apply", ApplyHandler),
    (f"{API}/jobs", JobsHandler),
    (f"{API}/jobs/{JOB_ID}", JobHandler),
    (f"{API}/jobs/{JOB_ID}/events", JobEventsHandler),
    (f"{API}/jobs/{JOB_ID}/rerun", JobRerunHandler),
    (f"{API}/chains", ChainsHandler),
    (f"{API}/jobs/{JOB_ID}/chain", JobChainHandler),
    (f"{API}/jobs/{JOB_ID}/resume", JobResumeHandler),
    (f"{API}/sweeps", SweepsHandler),
    (f"{API}/sweeps/{SWEEP_ID}", SweepHandler),
    (f"{API}/sweeps/{SWEEP_ID}/cancel", SweepCancelHandler),
    (f"{API}/jobs/{JOB_ID}/diff/{OTHER_ID}", JobDiffHandler),
    (f"{API}/compare", CompareHandler),
    (f"{API}/jobs/{JOB_ID}/logs", LogsHandler),
    (f"{API}/jobs/{JOB_ID}/logs/stream", LogStreamHandler),
    (f"{API}/jobs/{JOB_ID}/metrics", MetricsHandler),
    (f"{API}/jobs/{JOB_ID}/stacks", StacksHandler),
    (f"{API}/queue", QueueHandler),
    (f"{API}/queue/adopt", QueueAdoptHandler),
    (f"{API}/queue/logs", QueueLogsHandler),
    (f"{API}/gpu/nodes", GpuNodesHandler),
    (f"{API}/jobs/{JOB_ID}/gpu", JobGpuHandler),
    (f"{API}/feed", JobFeedHandler),
]

AGENT_ROUTES: list[tuple[str, type]] = [(MCP_ROUTE, McpHandler)]
"""The MCP endpoint (streamable HTTP, `agent/http.py`): authenticated like ROUTES, outside the
REST API's OpenAPI document (its contract is MCP's)."""


FALLBACK_ROUTE: tuple[str, type] = (r"hyperpod(?:/.*)?", NotFoundHandler)
"""Last: what no route above serves under hyperpod/ answers the documented JSON 404."""


class HyperPodApp(ExtensionApp, HyperPodSettings):
    """`c.HyperPodApp.<trait>` (or `c.HyperPodSettings.<trait>`) configures the extension."""

    name = "jupyter_hyperpod"
    service: HyperPodService | None = None
    _mcp: McpEndpoint | None = None
    _pools: dict[str, ThreadPoolExecutor] | None = None

    def initialize_settings(self) -> None:
        self._pools = {
            kind: ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"hyperpod-{kind}")
            for kind, size in POOLS.items()
        }
        executor = self._pools["api"]
        self.service = HyperPodService(self, adapters=Wiring())
        self.service.server_root = Path(self.serverapp.root_dir) if self.serverapp else None
        self._mcp = McpEndpoint(self.service)
        self._feed = self._job_feed(self.service)
        self.settings.update(
            hyperpod_service=self.service,
            hyperpod_executor=executor,
            hyperpod_pools=self._pools,
            hyperpod_mcp=self._mcp,
            hyperpod_feed=self._feed,
            hyperpod_job_looks=JobLooks(self.service),
        )
        self._executor = executor
        self._start_gpu_sampler()
        self.log.info(
            "jupyter-hyperpod: %s cluster, partition %s, user %s",
            self.service.orchestrator.kind,
            self.service.partition.root,
            self.user,
        )
        # Job states keep moving (and local pending jobs start) with nobody watching: the
        # service's tracker refreshes them in its own thread (core/tracker.py).

    @staticmethod
    def _job_feed(service: HyperPodService) -> JobFeed:
        """The job feed (`core/feed.py`) over what `GET jobs` reads, fed by the tracker."""
        unfinished = [JobState.PENDING, JobState.RUNNING]
        feed = JobFeed(lambda: service.jobs(states=unfinished, limit=1000), service.job)
        service.tracker.add_listener(feed.on_refresh)
        service.tracker.watched = lambda: feed.subscribers > 0  # pushed: at the tracker's pace
        return feed

    def _start_gpu_sampler(self) -> None:
        """Local backend, no metrics endpoint: sample this machine's GPUs from the start (in
        a thread: the first probe runs nvidia-smi), so that every job has a GPU history."""
        service = self.service
        if service is not None and service.orchestrator.jobs_run_here and not self.gpu_metrics_url:
            gpu = service.gpu
            if isinstance(gpu, GpuMetrics):  # this package's reader (what Wiring gives)
                threading.Thread(target=gpu.local, name="hyperpod-gpu-probe", daemon=True).start()

    def initialize_handlers(self) -> None:
        self.handlers.extend(ROUTES)
        self.handlers.extend(AGENT_ROUTES)
        self.handlers.append(FALLBACK_ROUTE)

    async def stop_extension(self) -> None:
        if self._mcp is not None:
            self._mcp.close()
        if self.service is not None:
            self.service.close()
        # The pools exist only once initialize_settings ran (a failed start stops without them).
        for pool in (self._pools or {}).values():
            pool.shutdown(wait=False, cancel_futures=True)
