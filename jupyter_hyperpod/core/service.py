"""The application core: what the REST handlers, the CLI and the magics all call.

`HyperPodService` is a facade: it builds its collaborators, each given what it needs, and
delegates to them. The live backend and cluster (`Connection`), the user's job records in that
scope (`JobBook`), cluster paths (`ClusterPaths`), switching and AWS (`Connector`), specs and
previews (`SpecBuilder`), the two-phase submit (`Submission`), the user's own files
(`FileApply`), the tracker's refresh and progress (`JobTracking`), reads (`JobReads`), acting
on a job (`JobControl`), chains and holds (`ChainService`), the queue (`QueueView`), and the
diagnosis and GPU metrics (`ClusterProbes`).
"""

from __future__ import annotations

import secrets
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from .adapters import Adapters, GpuReader, default_adapters
from .api import Diagnosis, FileText, LogEvent, RankArg, SubmitBody, request_body
from .applying import FileApply
from .backend import LogReader, Orchestrator
from .byo import AppliedFile
from .catalog import TemplateCatalog, load_catalog
from .chain_service import ChainService
from .chains import ChainSubmitted, JobChain, chain_request
from .compare import JobComparer
from .connection import Connection
from .connector import Connector
from .control import JobControl
from .errors import InvalidRequest
from .jobbook import JobBook
from .models import (
    AwsClusterList,
    ClusterInfo,
    FileListing,
    ForgottenJob,
    Job,
    JobComparison,
    JobDiff,
    JobList,
    JobMetrics,
    JobSpec,
    JobState,
    LogSnapshot,
    Node,
    Rendered,
    StackDump,
    TemplateInfo,
)
from .partition import MAX_TEXT_FILE, Partition, partition_dir
from .paths import ClusterPaths
from .probes import ClusterProbes
from .queue import QueueLogs, QueuePage
from .queue_view import QueueView
from .reads import MAX_TAIL_LINES, JobReads
from .settings import HyperPodSettings
from .specs import SpecBuilder
from .store import JobStore
from .submission import Submission
from .sweep_service import SweepService
from .sweeps import Sweep, SweepList
from .tracking import JobTracking

if TYPE_CHECKING:
    from .gpu_models import GpuNodes, JobGpu

__all__ = ["MAX_TAIL_LINES", "HyperPodService"]


class HyperPodService:
    def __init__(
        self,
        settings: HyperPodSettings,
        orchestrator: Orchestrator | None = None,
        *,
        create_partition: bool = True,
        catalog: TemplateCatalog | None = None,
        adapters: Adapters | None = None,
    ) -> None:
        """`create_partition`: make the partition directory now (the server does); without it
        (the CLI and the magics standalone) only a submit makes it: reads never do.
        `adapters`: what builds the backend and reaches AWS, MLflow, the GPU metrics
        (`core/adapters.py`); by default this package's composition root (`wiring.py`)."""
        self.settings = settings
        self.adapters = adapters = adapters or default_adapters()
        self.catalog = catalog or load_catalog(settings.template_catalog)
        """The job templates (`core/catalog.py`): given, or named by `template_catalog`."""
        self.fs_root = Path(settings.shared_fs_root).expanduser().resolve()
        self.partition = partition = Partition(
            partition_dir(self.fs_root, settings.partition, settings.user)
        )
        if create_partition:
            partition.ensure()
        self.store = JobStore(settings.job_store)
        self.snapshots = adapters.snapshotter(settings, partition)
        """What takes each job's snapshot at submit, which the job runs from (#24)."""
        backend = orchestrator or adapters.orchestrator(settings)
        self.identity = backend.identity
        """Who the user is (`core/identity.py`): one object, the backends' too."""
        self.connection = connection = Connection(settings, self.fs_root, backend)
        self.owner = f"{socket.gethostname()}:{threading.get_native_id()}:{secrets.token_hex(6)}"
        """This service's lease in the job store: the local queue starts only its own jobs and
        those of owners that are gone (core/store.py `claim_start`)."""
        self.book = book = JobBook(self.store, connection, settings.user, self.owner)
        self.paths = paths = ClusterPaths(settings, connection, partition)
        self.connector = Connector(
            settings,
            connection,
            self.store,
            lambda: adapters.aws,
            self.identity,
            partition,
            paths,
            owner=self.owner,
            server_root=lambda: self.server_root,
            switched=self._switched,
        )
        self.connector.adopt_backend(backend)
        self.chains = ChainService(
            self.store,
            settings.user,
            connection.scope,
            owner=self.owner,
            native=lambda: self.orchestrator.holds_dependencies,
            start_spec=lambda spec, rerun_of: self.submission.submit(spec, rerun_of=rerun_of),
            start_stored=lambda job_id: self.submission.start_stored(job_id),
            cancel_on_cluster=lambda job, reason: self.control.cancel_with(
                job.id, reason, event=f"cancelled: {reason}"
            ),
            spec_from_body=self.spec_from_body,
            forget=lambda job_id: self.forget(job_id, delete_files=True),
        )
        """Holds and chains (#24): `chains.releaser` is the hold engine (`core/holds.py`)."""
        self.control = JobControl(
            connection,
            book,
            partition,
            self.snapshots,
            self.chains,
            nudge=self._nudge,
            forgotten=lambda job_id: self.tracking.forget(job_id),
        )
        self.tracking = JobTracking(
            settings,
            connection,
            book,
            paths,
            partition,
            adapters.progress,
            owner=self.owner,
            cancel=lambda job_id, evidence: self.control.watchdog_cancel(job_id, evidence),
            after_refresh=self._after_refresh,
        )
        self.tracker = self.tracking.tracker
        self.watch = self.tracking.watch
        self.submission = Submission(
            connection,
            paths,
            partition,
            book,
            self.snapshots,
            self.chains,
            nudge=self._nudge,
            python=lambda: self.specs.template_context().python,
        )
        self.specs = SpecBuilder(
            settings, self.catalog, connection, partition, paths, launch=self.submission.launch
        )
        self.files_applied = FileApply(connection, book, partition, paths, nudge=self._nudge)
        self.reads = JobReads(
            connection,
            book,
            self.tracking,
            partition,
            paths,
            adapters.job_metrics,
            heartbeat=lambda: float(settings.heartbeat_interval),
        )
        self.probes = ClusterProbes(
            settings,
            connection,
            book,
            partition,
            paths,
            adapters,
            served=lambda: self.server_root is not None,
            refresh=self.refresh,
        )
        self.queue_view = QueueView(
            connection, book, paths, job=self.job, refresh=lambda: self.refresh(max_age=0)
        )
        self.comparer = JobComparer(self.job, self.metrics, self.snapshots)
        self.sweep_groups = SweepService(
            self.store,
            settings.user,
            connection.scope,
            self.chains.releaser,
            max_points=lambda: int(settings.max_sweep_points),
            build=self.spec_from_body,
            check=self._check_member,
            start=lambda spec: self.submission.submit(spec),
            cancel=self.cancel,
            forget=lambda job_id: self.forget(job_id, delete_files=True),
            metrics=self.metrics,
        )
        """Sweeps (#24 item 3, `core/sweep_service.py`): a group of jobs, capped by a gate."""
        self.tracker.start()

    server_root: Path | None = None
    """The Jupyter server's root_dir, when there is one: files under it open in JupyterLab."""

    @property
    def orchestrator(self) -> Orchestrator:
        """The backend in use now (a switch replaces it: `use_orchestrator`)."""
        return self.connection.orchestrator

    @property
    def cluster_name(self) -> str:
        return self.connection.cluster_name

    @property
    def description(self) -> str:
        return f"the core in this process ({self.orchestrator.kind} orchestrator)"

    def close(self) -> None:
        self.tracker.stop()
        self.watch.close()
        self.store.drop_lease(self.owner)
        self.orchestrator.close()
        self.store.close()
        self.probes.close()

    def _nudge(self) -> None:
        """A job was stored or changed here: the feed's listeners hear it at once, and the
        tracker looks at the cluster soon (`Tracker.fresh_for`), not at once."""
        self.tracker.publish()
        self.tracker.nudge()

    def _switched(self) -> None:
        """Another backend: refresh now."""
        self.tracker.nudge(now=True)

    def _after_refresh(self, jobs: list[Job]) -> None:
        """After each status refresh: the hold engine, then the queue's explanations."""
        self.chains.refresh(jobs)
        self.queue_view.annotate_pending()

    # -- connecting (core/connector.py) ----------------------------------------------------
    def use_orchestrator(self, kind: str, **traits: Any) -> ClusterInfo:
        return self.connector.use_orchestrator(kind, **traits)

    def aws_clusters(self, region: str | None = None) -> AwsClusterList:
        """The HyperPod clusters of the region (sagemaker:ListClusters, DescribeCluster)."""
        return self.connector.aws_clusters(region)

    def connect(
        self,
        cluster: str,
        *,
        region: str | None = None,
        namespace: str | None = None,
        auth: Literal["exec", "token"] = "exec",
        slurm: bool = False,
        controller_group: str | None = None,
    ) -> ClusterInfo:
        return self.connector.connect(
            cluster,
            region=region,
            namespace=namespace,
            auth=auth,
            slurm=slurm,
            controller_group=controller_group,
        )

    # -- paths (core/paths.py) -------------------------------------------------------------
    def to_cluster(self, path: Path) -> str:
        """An absolute path on this machine as the cluster's jobs see it."""
        return self.paths.to_cluster(path)

    @property
    def mlflow_uri_for_jobs(self) -> str:
        return self.paths.mlflow_uri_for_jobs

    def mlflow_uri_for_server(self, job_uri: str | None = None) -> str:
        return self.paths.mlflow_uri_for_server(job_uri)

    # -- cluster ---------------------------------------------------------------------------
    def cluster(self) -> ClusterInfo:
        return self.connector.cluster()

    def nodes(self) -> list[Node]:
        return self.orchestrator.list_nodes()

    def files(
        self, path: str = "", *, offset: int = 0, limit: int = 500, sort: str = "name"
    ) -> FileListing:
        return self.partition.listing(path, offset=offset, limit=limit, sort=sort)

    def read_file(self, path: str, *, limit: int = 65536) -> FileText:
        """A small UTF-8 text file of the partition, through the resolver (`Partition.read_text`)."""
        if not 1 <= limit <= MAX_TEXT_FILE:
            raise InvalidRequest(f"limit must be between 1 and {MAX_TEXT_FILE}", field="limit")
        text = self.partition.read_text(path, field="path", limit=limit)
        return FileText(path=path, text=text, size=len(text.encode("utf-8")))

    # -- templates and specs (core/specs.py) -----------------------------------------------
    def templates(self) -> list[TemplateInfo]:
        return self.specs.templates()

    def spec_from_body(self, body: Any) -> JobSpec:
        """A REST/CLI body, either a full spec or {name, template, params}, as a validated JobSpec."""
        return self.specs.spec_from_body(body)

    def render(self, spec: SubmitBody | None = None, /, **fields: Any) -> Rendered:
        return self.specs.render(spec, **fields)

    # -- jobs (core/submission.py, core/reads.py, core/control.py) -------------------------
    def submit(self, spec: SubmitBody | None = None, /, **fields: Any) -> Job:
        return self.submission.submit(self.spec_from_body(request_body(spec, fields)))

    def rerun(self, job_id: str, *, with_changes: bool = False) -> Job:
        """Start a job's spec again: from its snapshot (exactly what it ran), or `with_changes`
        from the workdir's files as they are now (#24 item 2)."""
        before, _ = self.book.get(job_id)
        spec = JobSpec.model_validate(before.spec.model_dump(exclude={"sweep"}))
        return self.submission.submit(spec, rerun_of=None if with_changes else before.id)

    def refresh(self, *, max_age: float = 0.5) -> None:
        """Refresh now, in this thread, unless one finished less than max_age seconds ago (one
        at a time with the tracker's background refresh). Readers never call this."""
        self.tracker.refresh(max_age)

    def apply(
        self,
        text: str = "",
        /,
        *,
        filename: str = "",
        fix: bool = False,
        dry_run: bool = False,
        resubmit: str | None = None,
    ) -> AppliedFile:
        """Submit the user's own manifest or sbatch script as it is (`FileApply.apply`)."""
        return self.files_applied.apply(
            text, filename=filename, fix=fix, dry_run=dry_run, resubmit=resubmit
        )

    @property
    def reads_wait(self) -> bool:
        """Whether a status read may still wait (else the server answers it on its loop: it
        touches only the store and the tracker's caches; `JobTracking.reads_wait`)."""
        return self.tracking.reads_wait

    def jobs(
        self, *, states: Sequence[JobState] | None = None, limit: int = 100, offset: int = 0
    ) -> JobList:
        return self.reads.jobs(states=states, limit=limit, offset=offset)

    def job(self, job_id: str) -> Job:
        return self.reads.job(job_id)

    def dump_stacks(self, job_id: str) -> StackDump:
        """py-spy dump of every rank of a running job, stored in the job's directory."""
        return self.reads.dump_stacks(job_id)

    def stacks(self, job_id: str) -> StackDump:
        """The job's last stack dump, as stored with it."""
        return self.reads.stacks(job_id)

    def forget(self, job_id: str, *, delete_files: bool = False) -> ForgottenJob:
        """Remove a job from the history (`JobControl.forget`)."""
        return self.control.forget(job_id, delete_files=delete_files)

    def cancel(self, job_id: str) -> Job:
        return self.control.cancel(job_id)

    def add_event(self, job_id: str, event: str) -> Job:
        """Add one line to the job's events (kept with the backend's, the newest 50)."""
        return self.control.add_event(job_id, event)

    # -- chains (#24 item 4; core/chains.py, core/chain_service.py) -------------------------
    def submit_chain(self, request: Any) -> ChainSubmitted:
        """Submit every link of a chain (`POST chains`): each waits for its `after`."""
        if isinstance(request, BaseModel):
            request = request.model_dump(mode="json")
        return self.chains.submit_chain(chain_request(request))

    def chain(self, job_id: str) -> JobChain:
        """Every job linked to this one by `after`, oldest first."""
        job, _ = self.book.get(job_id, connected=False)
        return self.chains.chain(job)

    def resume(self, job_id: str, *, with_changes: bool = False) -> ChainSubmitted:
        """Run a chain again from its failed link: that link and what waited on it."""
        job, _ = self.book.get(job_id)
        return self.chains.resume(job, with_changes=with_changes)

    # -- sweeps (#24 item 3; core/sweeps.py, core/sweep_service.py) -------------------------
    def _check_member(self, spec: JobSpec) -> None:
        """What a submit of the spec would refuse, refused now (nothing stored)."""
        self.chains.check(spec)
        self.render(spec)

    def submit_sweep(self, request: Any) -> Sweep:
        """Submit a sweep (`POST sweeps`): every member checked first, then each a job."""
        return self.sweep_groups.submit(request)

    def sweeps(self) -> SweepList:
        """The user's sweeps here (group rows), newest first."""
        return self.sweep_groups.sweeps()

    def sweep(self, sweep_id: str) -> Sweep:
        return self.sweep_groups.sweep(sweep_id)

    def cancel_sweep(self, sweep_id: str) -> Sweep:
        """Cancel every unfinished member of a sweep (the waiting ones first)."""
        return self.sweep_groups.cancel(sweep_id)

    # -- the cluster's queue (every user's jobs; core/queue_view.py) ----------------------
    def queue(
        self,
        *,
        mine: bool = False,
        state: str | list[str] | None = "",
        partition: str | None = None,
        offset: int = 0,
        limit: int = 100,
        fresh: bool = False,
    ) -> QueuePage:
        """A page of the cluster's queue: every user's jobs; `state` '' = pending and running,
        'all' = every state the cluster still shows; `fresh` asks the cluster now."""
        return self.queue_view.page(
            mine=mine,
            state=state,
            partition=partition,
            offset=offset,
            limit=limit,
            fresh=fresh,
        )

    def adopt(self, queue_id: str) -> Job:
        """Open one of my jobs submitted elsewhere (sbatch, kubectl) like a job submitted here."""
        return self.queue_view.adopt(queue_id)

    def queue_logs(self, queue_id: str, *, tail: int = 200) -> QueueLogs:
        """A queue row's log, only where the cluster lets this user read it."""
        return self.queue_view.logs(queue_id, tail)

    # -- logs and metrics (core/reads.py) --------------------------------------------------
    def log_reader(self, job_id: str, rank: int = 0) -> LogReader:
        return self.reads.log_reader(job_id, rank)

    def logs(self, job_id: str, *, rank: int = 0, tail: int = 200) -> LogSnapshot:
        return self.reads.logs(job_id, rank=rank, tail=tail)

    def follow(
        self,
        job_id: str,
        *,
        rank: RankArg = 0,
        offset: int = 0,
        offsets: Mapping[int, int] | None = None,
    ) -> Iterator[LogEvent]:
        """The log stream's events, read from the backend in this process (same protocol)."""
        return self.reads.follow(job_id, rank=rank, offset=offset, offsets=offsets)

    def metrics(self, job_id: str) -> JobMetrics:
        return self.reads.metrics(job_id)

    # -- comparing jobs (#24 item 2) ---------------------------------------------------------
    def diff(self, job_id: str, other_id: str) -> JobDiff:
        """What differs between two jobs: spec, resolved configs, code files, packages."""
        return self.comparer.diff(job_id, other_id)

    def compare(self, job_ids: Sequence[str]) -> JobComparison:
        """Two to ten jobs side by side: state, duration, what sets them apart, final metrics."""
        return self.comparer.compare(job_ids)

    # -- diagnosis and GPU metrics (core/probes.py) ----------------------------------------
    def diagnose(self) -> Diagnosis:
        """The login-node checks of the orchestrator in use (`ClusterProbes.diagnose`)."""
        return self.probes.diagnose()

    @property
    def gpu(self) -> GpuReader:
        """The GPU metrics reader, made on first use."""
        return self.probes.gpu

    def gpu_nodes(self) -> GpuNodes:
        """Each node's GPUs now; no source: none, with the reason."""
        return self.probes.gpu_nodes()

    def job_gpu(self, job_id: str, *, step: float | None = None) -> JobGpu:
        """The job's GPU utilisation and memory over its run."""
        return self.probes.job_gpu(job_id, step=step)
