"""The application core: what the REST handlers, the CLI and the magics all call.

It owns the user's partition, the job store and the orchestrator; it validates requests into one
`JobSpec`, translates IDE paths to cluster paths in one place, and keeps job states fresh with
one batched backend query at a time.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from .adapters import Adapters, GpuReader, default_adapters
from .api import (
    Diagnosis,
    DiagnosticCheck,
    FileText,
    JobEventRequest,
    LogEvent,
    RankArg,
    SubmitBody,
    connect_request,
    request_body,
)
from .backend import FileLogReader, JobUpdate, Launch, LogReader, Orchestrator, StoredJob
from .byo import (
    STORED_NAME,
    AppliedFile,
    ApplyRequest,
    FileContext,
    PreparedFile,
    apply_request,
    problems_message,
    stored_suffix,
    unified,
)
from .catalog import TemplateCatalog, TemplateContext, load_catalog
from .chain_service import ChainService
from .chains import ChainSubmitted, JobChain, chain_request
from .compare import JobComparer
from .errors import (
    AwsDenied,
    Forbidden,
    HyperPodError,
    InvalidRequest,
    NotConnected,
    NotFound,
    PathNotAllowed,
    validation_error,
)
from .jobwatch import JobWatch
from .launch import check_program
from .logprotocol import Follow, follow_events, settle
from .models import (
    AwsCluster,
    AwsClusterList,
    ClusterInfo,
    FileListing,
    FileSystemInfo,
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
    RankStack,
    Rendered,
    StackDump,
    TemplateInfo,
    TemplateParam,
    TemplateSubmission,
)
from .partition import MAX_TEXT_FILE, Partition, check_text, partition_dir
from .queue import QueueLogs, QueuePage
from .queue_view import QueueView
from .registry import backend_class, state_class
from .settings import HyperPodSettings
from .snapshot import run_from_snapshot
from .stacks import mark_differences
from .state import BackendState
from .store import JobStore
from .timed_cache import TimedCache
from .tracker import Tracker

if TYPE_CHECKING:
    from .gpu_models import GpuNodes, JobGpu

log = logging.getLogger(__name__)

MAX_TAIL_LINES = 100_000
FIRST_REFRESH_WAIT = 2.0
LEASE_SECONDS = 30.0
"""A service that stopped refreshing this long is gone: its queued local jobs may be adopted."""
"""How long a read waits, once, for the first status refresh of a process that just started."""
JOBS_DIR = ".hyperpod/jobs"
EVENTS_KEPT = 50
"""The events `add_event` keeps on a job (the newest)."""


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
        self.adapters = adapters or default_adapters()
        self.catalog = catalog or load_catalog(settings.template_catalog)
        """The job templates (`core/catalog.py`): given, or named by `template_catalog`."""
        self.fs_root = Path(settings.shared_fs_root).expanduser().resolve()
        self.partition = Partition(partition_dir(self.fs_root, settings.partition, settings.user))
        if create_partition:
            self.partition.ensure()
        self.store = JobStore(settings.job_store)
        self.snapshots = self.adapters.snapshotter(settings, self.partition)
        """What takes each job's snapshot at submit, which the job runs from (#24)."""
        self._progress: TimedCache[str, Any] = TimedCache(self.PROGRESS_MAX_AGE)
        """Each running job's last progress, read by the tracker's refresh (`_refresh_progress`)."""
        self._mlflow_progress_cache: TimedCache[str, Any] = TimedCache(self.MLFLOW_PROGRESS_MAX_AGE)
        self.comparer = JobComparer(self.job, self.metrics, self.snapshots)
        """Jobs side by side from their records and snapshots (`diff`, `compare`, #24)."""
        self.orchestrator = orchestrator or self.adapters.orchestrator(settings)
        self.identity = self.orchestrator.identity
        """Who the user is (`core/identity.py`): one object, the backends' too."""
        self.cluster_root = PurePosixPath(
            settings.cluster_fs_root
            or self.orchestrator.default_cluster_fs_root
            or str(self.fs_root)
        )
        self._cluster_name: str | None = None
        self.owner = f"{socket.gethostname()}:{threading.get_native_id()}:{secrets.token_hex(6)}"
        """This service's lease in the job store: the local queue starts only its own jobs and
        those of owners that are gone (core/store.py `claim_start`)."""
        self._bind_store(self.orchestrator)
        self._migrate_state(self.orchestrator)
        self._refresh_lock = threading.Lock()
        """Held by a status refresh and by a switch of orchestrator: never by a reader."""
        self._youngest: float | None = None
        self.watch = JobWatch(settings, self._watch_reader, self._watchdog_cancel)
        """Step clocks, hangs and stragglers of the running jobs (`core/jobwatch.py`)."""
        self.tracker = Tracker(
            self._tracked_refresh,
            min_interval=float(settings.refresh_interval),
            max_interval=self.orchestrator.status_poll_max,
            name=f"hyperpod-tracker-{self.orchestrator.kind}",
        )
        self.chains = ChainService(
            self.store,
            settings.user,
            lambda: (self.orchestrator.kind, self.cluster_name),
            native=lambda: self.orchestrator.holds_dependencies,
            start_spec=lambda spec, rerun_of: self._start(spec, rerun_of=rerun_of),
            start_stored=self._start_stored,
            cancel_on_cluster=self._cancel_with,
            spec_from_body=self.spec_from_body,
            forget=lambda job_id: self.forget(job_id, delete_files=True),
        )
        """Holds and chains (#24): `chains.releaser` is the hold engine (`core/holds.py`)."""
        self.tracker.start()

    @property
    def description(self) -> str:
        return f"the core in this process ({self.orchestrator.kind} orchestrator)"

    def close(self) -> None:
        self.tracker.stop()
        self.watch.close()
        self.store.drop_lease(self.owner)
        self.orchestrator.close()
        self.store.close()
        if self._gpu is not None:
            self._gpu.close()

    def use_orchestrator(self, kind: str, **traits: Any) -> ClusterInfo:
        """Switch the running service to another backend, built with the same settings (`traits`
        override the configured ones). The new backend is built before the old one is closed, so a
        failure leaves the service as it was; jobs stay scoped to their orchestrator and cluster.
        The new cluster's name is asked before the switch too: a read never finds it unknown
        (it would ask the backend then, on the server's loop: `reads_wait`)."""
        new = backend_class(kind)(settings=self.settings, identity=self.identity, **traits)
        try:
            name = new.cluster_name()
        except BaseException:
            new.close()
            raise
        self._bind_store(new)
        with self._refresh_lock:
            old = self.orchestrator
            self.orchestrator = new
            self.cluster_root = PurePosixPath(
                self.settings.cluster_fs_root or new.default_cluster_fs_root or str(self.fs_root)
            )
            self._cluster_name = name
        self.tracker.nudge(now=True)
        old.close()
        log.info("orchestrator switched from %s to %s", old.kind, new.kind)
        return self.cluster()

    # -- AWS: HyperPod clusters and connect ----------------------------------------------
    def _kubernetes_trait(self, name: str) -> str:
        section = self.settings.config.get("KubernetesOrchestrator") or {}
        return str(section.get(name, "") or "")

    def _aws_region(self, region: str | None) -> str:
        found = region or self._kubernetes_trait("aws_region") or self.adapters.aws.default_region()
        if not found:
            raise InvalidRequest(
                "no AWS region: pass a region (--region), set AWS_REGION or "
                "c.KubernetesOrchestrator.aws_region",
                field="region",
            )
        return str(found)

    def aws_clusters(self, region: str | None = None) -> AwsClusterList:
        """The HyperPod clusters of the region (sagemaker:ListClusters, DescribeCluster)."""
        region = self._aws_region(region)
        with _aws_denied():
            found = self.adapters.aws.list_clusters(region)
        clusters = []
        for item in found:
            orchestrator = item.get("orchestrator")
            reason = None
            if orchestrator == "slurm":
                reason = "orchestrated by Slurm: use the slurm orchestrator from a login node"
            elif orchestrator is None:
                reason = (item.get("error") or {}).get("message") or "could not be described"
            elif item.get("status") not in (None, "InService", "Updating"):
                reason = f"the cluster is {item.get('status')}"
            clusters.append(
                AwsCluster(
                    name=item.get("name") or item.get("arn") or "",
                    arn=item.get("arn"),
                    status=item.get("status"),
                    orchestrator=orchestrator,
                    eks_cluster_arn=item.get("eks_cluster_arn"),
                    connectable=reason is None,
                    reason=reason,
                )
            )
        return AwsClusterList(region=region, clusters=clusters)

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
        """Write the kubeconfig context of an EKS HyperPod cluster and switch to it; with
        `slurm`, make this machine a login node of a Slurm one and switch to it."""
        aws = self.adapters.aws
        request = connect_request(
            {"cluster": cluster, "region": region, "namespace": namespace, "auth": auth}
            | {"slurm": slurm, "controller_group": controller_group}
        )
        region = self._aws_region(request.region or aws.region_of(request.cluster))
        if request.slurm:
            login = aws.connect_slurm(
                request.cluster, region=region, controller_group=request.controller_group
            )
            # The server's Slurm commands read it (their environment keeps SLURM_CONF).
            os.environ["SLURM_CONF"] = login["slurm_conf"]
            info = self.use_orchestrator("slurm")
            return info.model_copy(update={"details": {**info.details, "login_node": login}})
        kubeconfig = self._kubernetes_trait("kubeconfig") or aws.default_kubeconfig()
        with _aws_denied():
            result = aws.connect(
                request.cluster,
                region=region,
                kubeconfig=kubeconfig,
                namespace=request.namespace,
                auth=request.auth,
            )
        traits: dict[str, Any] = {
            "kubeconfig": kubeconfig,
            "context": result["context"],
            "hyperpod_cluster": result["hyperpod_cluster"] or result["hyperpod_cluster_arn"],
            "aws_region": region,
        }
        if request.namespace:
            traits["namespace"] = request.namespace
        return self.use_orchestrator("kubernetes", **traits)

    # -- paths ---------------------------------------------------------------------------
    def to_cluster(self, path: Path) -> str:
        """An absolute path on this machine as the cluster's jobs see it."""
        relative = path.resolve().relative_to(self.fs_root)
        return (
            str(self.cluster_root / relative.as_posix())
            if relative.parts
            else str(self.cluster_root)
        )

    def _translate_text(self, value: str) -> str:
        """Rewrite an IDE path prefix inside an argument or env value (`--out=/home/.../fs/x`)."""
        root = str(self.fs_root)
        cluster = str(self.cluster_root)
        if root == cluster or root not in value:
            return value
        return value.replace(root + "/", cluster + "/") if value != root else cluster

    @property
    def mlflow_uri_for_jobs(self) -> str:
        if self.settings.mlflow_tracking_uri:
            return str(self.settings.mlflow_tracking_uri)
        return f"sqlite:///{self.to_cluster(self.partition.root)}/.hyperpod/mlflow.db"

    def mlflow_uri_for_server(self, job_uri: str | None = None) -> str:
        uri = job_uri or self.mlflow_uri_for_jobs
        prefix = f"sqlite:///{self.cluster_root}/"
        if uri.startswith(prefix):
            return f"sqlite:///{self.fs_root}/{uri[len(prefix) :]}"
        return uri

    # -- cluster -------------------------------------------------------------------------
    @property
    def cluster_name(self) -> str:
        if self._cluster_name is None:
            self._cluster_name = self.orchestrator.cluster_name()
        return self._cluster_name

    def cluster(self) -> ClusterInfo:
        root = self.partition.root
        return ClusterInfo(
            orchestrator=self.orchestrator.kind,
            name=self.cluster_name,
            user=self.settings.user,
            filesystem=FileSystemInfo(
                root=str(self.fs_root),
                cluster_root=str(self.cluster_root),
                partition=str(root),
                partition_mode=self.settings.partition,
                contents_path=self.contents_path(),
            ),
            capabilities=self.orchestrator.capabilities().model_copy(
                update={"aws_connect": _boto3_available()}
            ),
            mlflow_uri=self.mlflow_uri_for_jobs,
            default_template=self.settings.default_template,
            details=self.orchestrator.details(),
            watch_cache=self.orchestrator.watch_cache_status(),
        )

    server_root: Path | None = None
    """The Jupyter server's root_dir, when there is one: files under it open in JupyterLab."""

    def contents_path(self) -> str | None:
        if self.server_root is None:
            return None
        try:
            relative = self.partition.root.resolve().relative_to(self.server_root.resolve())
        except ValueError:
            return None
        return relative.as_posix() if relative.parts else ""

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

    # -- templates and specs -------------------------------------------------------------
    def templates(self) -> list[TemplateInfo]:
        return self.catalog.infos()

    def template_context(self) -> TemplateContext:
        return TemplateContext(
            orchestrator=self.orchestrator.kind,
            partition=str(self.partition.root),
            mlflow_tracking_uri=self.mlflow_uri_for_jobs,
            # Local jobs run on this machine: with the server's own interpreter (where this
            # package and its extras are installed), not whatever `python3` is first on PATH.
            python=sys.executable
            if self.orchestrator.job_python == "server"
            else self.settings.cluster_python,
        )

    def spec_from_body(self, body: Any) -> JobSpec:
        """A REST/CLI body, either a full spec or {name, template, params}, as a validated JobSpec."""
        if not isinstance(body, dict):
            raise InvalidRequest("the request body must be a JSON object")
        if "template" in body and "command" not in body:
            try:
                submission = TemplateSubmission.model_validate(body)
            except ValidationError as error:
                raise validation_error(error) from None
            spec = self.catalog.build(submission, self.template_context())
            self._check_paths_exist(self.catalog.params(submission.template), spec.params)
            return spec
        try:
            return JobSpec.model_validate(body)
        except ValidationError as error:
            raise validation_error(error) from None

    def _check_paths_exist(self, params: list[TemplateParam], values: dict[str, Any]) -> None:
        for param in params:
            value = values.get(param.name)
            if param.type == "path" and param.must_exist and value:
                field = f"params.{param.name}"
                path = self.partition.resolve(str(value), field=field)
                if not path.exists():
                    raise InvalidRequest(f"'{value}' does not exist in your partition", field=field)
                if param.program:
                    check_program(path, str(value), field)

    def _launch(self, spec: JobSpec, job_id: str) -> Launch:
        if not spec.workdir and not self.partition.root.exists():
            workdir = self.partition.root  # a preview before the first submit makes it
        else:
            try:
                workdir = self.partition.directory(spec.workdir, field="workdir")
            except NotFound as error:
                raise InvalidRequest(error.message, field="workdir") from None
        job_dir = self.partition.root / JOBS_DIR / job_id
        env = {key: self._translate_text(value) for key, value in spec.env.items()}
        env.setdefault("MLFLOW_TRACKING_URI", self.mlflow_uri_for_jobs)
        env.update(
            HYPERPOD_JOB_ID=job_id,
            HYPERPOD_JOB_NAME=spec.name,
            HYPERPOD_JOB_DIR=self.to_cluster(job_dir),
            HYPERPOD_PARTITION=self.to_cluster(self.partition.root),
        )
        after_ids, after_any = self.chains.dependency(spec)
        return Launch(
            job_id=job_id,
            spec=spec,
            user=self.settings.user,
            command=[self._translate_text(part) for part in spec.command],
            workdir=self.to_cluster(workdir),
            job_dir=self.to_cluster(job_dir),
            job_dir_local=job_dir,
            env=env,
            after_ids=after_ids,
            after_any=after_any,
        )

    @staticmethod
    def new_job_id(spec: JobSpec) -> str:
        return f"{spec.name}-{secrets.token_hex(3)}"

    def render(self, spec: SubmitBody | None = None, /, **fields: Any) -> Rendered:
        body = request_body(spec, fields)
        spec = self.spec_from_body(body)
        rendered = self.orchestrator.render(self._launch(spec, f"{spec.name}-xxxxxx"))
        values = (
            self.catalog.values(TemplateSubmission.model_validate(body), self.template_context())
            if spec.template and "command" not in body
            else {}
        )
        return Rendered(
            format=rendered.format,
            language=rendered.language,
            text=rendered.text,
            spec=spec,
            warnings=rendered.warnings,
            values=values,
        )

    # -- jobs ----------------------------------------------------------------------------
    def submit(self, spec: SubmitBody | None = None, /, **fields: Any) -> Job:
        return self._start(self.spec_from_body(request_body(spec, fields)))

    def rerun(self, job_id: str, *, with_changes: bool = False) -> Job:
        """Start a job's spec again: from its snapshot (exactly what it ran), or `with_changes`
        from the workdir's files as they are now (#24 item 2)."""
        before, _ = self._get(job_id)
        spec = JobSpec.model_validate(before.spec.model_dump())
        return self._start(spec, rerun_of=None if with_changes else before.id)

    def _start(self, spec: JobSpec, *, rerun_of: str | None = None) -> Job:
        self.chains.check(spec)  # what it waits for (#24 chains): refused before anything exists
        self.partition.ensure()  # the first submit of a standalone core makes the partition
        job_id = self.new_job_id(spec)
        launch = self._launch(spec, job_id)
        # The job runs from its snapshot (refused over the admin's limit, creating nothing).
        if rerun_of:
            snapshot = self.snapshots.clone(rerun_of, job_id)
        else:
            snapshot = self.snapshots.take(
                job_id,
                self.partition.directory(spec.workdir, field="workdir"),
                spec=spec.model_dump(mode="json"),
                command=spec.command,
                env=spec.env,
                python=self.template_context().python,
            )
        tree = self.partition.root / snapshot.tree
        shown = self.to_cluster(tree)
        launch = dataclasses.replace(
            launch,
            command=run_from_snapshot(launch.command, tree, shown),
            env={**launch.env, "HYPERPOD_SNAPSHOT": shown, "HYPERPOD_WORKDIR": launch.workdir},
        )
        # All or nothing: what the backend would refuse is refused before anything is stored or
        # started (render runs the same checks), then the job is stored, then started. A start
        # the backend refuses (a typed error: nothing started) leaves no record; any other
        # failure is recorded as FAILED with its reason, which also frees its slot.
        try:
            self.orchestrator.render(launch)
        except BaseException:
            self.snapshots.remove(job_id)
            raise
        job = Job(
            id=job_id,
            name=spec.name,
            user=self.settings.user,
            orchestrator=self.orchestrator.kind,
            state=JobState.PENDING,
            created=time.time(),
            spec=spec,
            snapshot=snapshot,
        )
        try:
            verdict = self.chains.verdict(job)  # held until its gates let it start (#24)
        except BaseException:
            self.snapshots.remove(job_id)
            raise
        if verdict.kind == "waiting":
            job.held = job.state_reason = verdict.reason
        data = {"mlflow_uri": launch.env["MLFLOW_TRACKING_URI"]}
        try:
            self.store.insert(job, self.cluster_name, data)
        except (UnicodeError, ValueError) as error:
            self.snapshots.remove(job_id)
            raise InvalidRequest(f"the job cannot be stored: {error}") from None
        self.store.set_owner(job_id, self.owner)
        if job.held is not None:
            self.tracker.nudge(now=True)
            return job
        return self._submit_launch(job, data, launch)

    def _start_stored(self, job_id: str) -> Job:
        """Start a stored job that was held (its hold claimed): its launch built again from
        its spec and snapshot, then handed to the backend as a submit would."""
        job, data = self._get(job_id)
        launch = self._launch(job.spec, job_id)
        if job.snapshot is not None:
            tree = self.partition.root / job.snapshot.tree
            shown = self.to_cluster(tree)
            launch = dataclasses.replace(
                launch,
                command=run_from_snapshot(launch.command, tree, shown),
                env={**launch.env, "HYPERPOD_SNAPSHOT": shown, "HYPERPOD_WORKDIR": launch.workdir},
            )
        job = job.model_copy(update={"held": None, "state_reason": None})
        self.store.update(job_id, state_reason=None)
        try:
            return self._submit_launch(job, data, launch, keep_record=True)
        except HyperPodError as error:
            reason = f"the job could not be started: {error.message}"
            update = JobUpdate(state=JobState.FAILED, state_reason=reason, ended=time.time())
            return self._save(job, data, update)

    def _submit_launch(
        self, job: Job, data: dict[str, Any], launch: Launch, *, keep_record: bool = False
    ) -> Job:
        """Hand a stored job to the backend. A typed refusal removes the record and the
        snapshot (nothing started), unless `keep_record` (a held job released later: the
        caller records it FAILED)."""
        job_id = job.id
        try:
            # Created here, removed again if the backend fails: no half-created job directory,
            # and a read-only or full file system answers 503 with what to do.
            with self.partition.new_directory(launch.job_dir_local, shown=f"{JOBS_DIR}/{job_id}"):
                update = self.orchestrator.submit(launch)
        except HyperPodError:
            if not keep_record:
                self.store.delete(job_id)
                self.snapshots.remove(job_id)
            raise
        except Exception as error:
            log.exception("the start of job %s failed", job_id)
            update = JobUpdate(
                state=JobState.FAILED,
                state_reason=f"the job could not be started: {error}",
                ended=time.time(),
            )
        self.tracker.nudge(now=True)
        return self._save(job, data, update)

    def refresh(self, *, max_age: float = 0.5) -> None:
        """Refresh now, in this thread, unless one finished less than max_age seconds ago (one
        at a time with the tracker's background refresh). Readers never call this."""
        self.tracker.refresh(max_age)

    # -- the user's own files (core/byo.py; the backend reads its own format) ------------
    def check_cluster_path(self, path: str, field: str) -> None:
        """A path as the cluster sees it must be in the user's partition (through the one
        resolver: symlinks followed on this machine)."""
        partition = PurePosixPath(self.to_cluster(self.partition.root))
        if ".." in PurePosixPath(path).parts:
            raise PathNotAllowed(f"{field}: '{path}' has '..' (rule: paths)", field=field)
        try:
            relative = PurePosixPath(path).relative_to(partition)
        except ValueError:
            raise PathNotAllowed(
                f"{field}: '{path}' is outside your partition ({partition}) (rule: paths)",
                field=field,
            ) from None
        self.partition.resolve(relative.as_posix() if relative.parts else "", field=field)

    def _file_context(self, request: ApplyRequest, job_id: str) -> FileContext:
        job_dir = self.partition.root / JOBS_DIR / job_id
        replaces = None
        if request.resubmit:
            before, _ = self._get(request.resubmit)
            replaces = before.backend_id if before.state.finished else None
        return FileContext(
            text=request.text,
            filename=request.filename,
            job_id=job_id,
            user=self.settings.user,
            fix=request.fix,
            partition=self.to_cluster(self.partition.root),
            job_dir=self.to_cluster(job_dir),
            job_dir_local=job_dir,
            replaces=replaces,
            check_path=self.check_cluster_path,
        )

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
        """Submit the user's own manifest or sbatch script as it is (plus our marks, shown):
        checked with the real schemas, the admin's policy and the operator's rules first;
        `dry_run` previews, `fix` accepts the offered fixes, `resubmit` sends a job's stored
        file again. The job is then tracked like any other."""
        request = apply_request(
            {"text": text, "filename": filename, "fix": fix, "dry_run": dry_run}
            | ({"resubmit": resubmit} if resubmit else {})
        )
        if request.resubmit:
            request = self._stored_request(request)
        first = self.orchestrator.prepare_file(self._file_context(request, "job-xxxxxx"))
        name = _job_name(first.name)
        job_id = f"{name[:55]}-{'xxxxxx' if request.dry_run else secrets.token_hex(3)}"
        context = self._file_context(request, job_id)
        prepared = self.orchestrator.prepare_file(context)
        shown = request.filename or f"job{stored_suffix(prepared.format)}"
        answer = AppliedFile(
            format=prepared.format,
            language=prepared.language,
            filename=shown,
            text=prepared.text,
            diff=unified(prepared.original, prepared.text, shown),
            changes=prepared.changes,
            problems=prepared.problems,
            fix_diff=unified(prepared.original, prepared.fixed, shown) if prepared.fixed else "",
            warnings=prepared.warnings,
            dry_run=request.dry_run,
        )
        if request.dry_run:
            return answer
        if prepared.problems and not (request.fix and prepared.fixed == prepared.text):
            raise InvalidRequest(problems_message(prepared.problems, shown), field="text")
        return answer.model_copy(update={"job": self._submit_file(request, prepared, context)})

    def _stored_request(self, request: ApplyRequest) -> ApplyRequest:
        job, _ = self._get(str(request.resubmit), connected=True)
        stored = job.spec.params.get("applied_file")
        if not stored:
            raise InvalidRequest(
                f"job {job.id} was not submitted from a file: resubmit it from the form",
                field="resubmit",
            )
        path = self.partition.resolve(str(stored), field="resubmit")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise NotFound(
                f"the stored file of job {job.id} ({stored}) cannot be read: {error.strerror}",
                field="resubmit",
            ) from None
        return request.model_copy(
            update={
                "text": text,
                "filename": str(job.spec.params.get("filename") or ""),
                "fix": bool(job.spec.params.get("fix")) or request.fix,
            }
        )

    def _submit_file(
        self, request: ApplyRequest, prepared: PreparedFile, context: FileContext
    ) -> Job:
        self.partition.ensure()
        job_id = context.job_id
        stored = f"{JOBS_DIR}/{job_id}/{STORED_NAME}{stored_suffix(prepared.format)}"
        spec = JobSpec(
            name=_job_name(prepared.name),
            command=prepared.command or [f"({prepared.format} {request.filename})"],
            nodes=prepared.nodes,
            procs_per_node=prepared.procs_per_node,
            gpus_per_node=prepared.gpus_per_node,
            image=prepared.image,
            kind=prepared.kind,
            namespace=prepared.namespace,
            queue=prepared.queue,
            params={
                "applied_file": stored,
                "filename": request.filename,
                "fix": request.fix,
            },
        )
        job = Job(
            id=job_id,
            name=spec.name,
            user=self.settings.user,
            orchestrator=self.orchestrator.kind,
            state=JobState.PENDING,
            created=time.time(),
            spec=spec,
            events=[f"submitted from {request.filename or 'a file'} (stored as {stored})"],
        )
        data = {"mlflow_uri": self.mlflow_uri_for_jobs}
        self.store.insert(job, self.cluster_name, data)
        try:
            with self.partition.new_directory(context.job_dir_local, shown=f"{JOBS_DIR}/{job_id}"):
                (
                    context.job_dir_local / f"{STORED_NAME}{stored_suffix(prepared.format)}"
                ).write_text(request.text, encoding="utf-8")
                update = self.orchestrator.submit_file(prepared, context)
        except BaseException:
            self.store.delete(job_id)
            raise
        update.events = [*job.events, *(update.events or [])]
        self.tracker.nudge(now=True)
        return self._save(job, data, update)

    def _tracked_refresh(self) -> float | None:
        """What the tracker runs: returns the age of the youngest unfinished job (or None)."""
        self.store.renew_lease(self.owner, max(LEASE_SECONDS, 3 * self.tracker.max_interval))
        self._refresh_once()
        try:
            self._refresh_progress()
        except Exception:  # progress is a hint: its failure never marks the states stale
            log.exception("the progress refresh failed")
        try:
            self._refresh_watch()
        except Exception:  # so is the watchdog
            log.exception("the watchdog refresh failed")
        return self._youngest

    def _migrate_state(self, orchestrator: Orchestrator) -> None:
        """Rewrite the stored state of this backend's jobs in its current model (rows written
        by older versions: e.g. Slurm's events, kept twice before, now only on the job)."""
        for job_id, data in self.store.data_of(orchestrator.kind):
            current = orchestrator.State.load(data).stored()
            if current != data:
                self.store.update(job_id, data=current)

    def _bind_store(self, orchestrator: Orchestrator) -> None:
        """Backends that queue jobs themselves (local) queue them in the shared store."""
        if orchestrator.queues_in_job_store:
            self.store.renew_lease(self.owner, LEASE_SECONDS)
            orchestrator.bind_store(self.store, self.owner)

    @property
    def reads_wait(self) -> bool:
        """Whether a status read (`jobs`, `job`) may still wait: for the first refresh of a
        process that has just started, or for the cluster's name (asked of the backend once).
        Otherwise a read touches only the store (its own connection: never behind a write) and
        the tracker's caches, so the server answers it at once on its loop instead of handing
        it to a thread (the hop costs more than the read)."""
        return not self.tracker.first_done or self._cluster_name is None

    def _watch(self) -> None:
        """A reader looks at unfinished jobs: refresh soon in the background, never here (but a
        process that has just started waits a moment for its first look at the backend)."""
        self.tracker.nudge()
        self.tracker.wait_first(FIRST_REFRESH_WAIT)

    def _mark_stale(self, value: Any) -> Any:
        """The tracker's staleness on a job (unfinished) or a job list."""
        stale = self.tracker.stale
        if stale is None or (isinstance(value, Job) and value.state.finished):
            return value
        return value.model_copy(update={"stale_reason": stale.reason, "stale_since": stale.since})

    def _refresh_once(self) -> None:
        """One batched status query for all unfinished jobs; updates the store."""
        with self._refresh_lock:
            rows, _ = self.store.query(
                orchestrator=self.orchestrator.kind,
                cluster=self.cluster_name,
                user=self.settings.user,
                states=[JobState.PENDING, JobState.RUNNING],
            )
            # A held job is not on the cluster yet: the hold engine releases it (#24).
            stored = [_stored(job, data) for job, _, data in rows if job.held is None]
            if stored:
                updates = self.orchestrator.refresh(stored)
                for job, _, data in rows:
                    update = updates.get(job.id)
                    if update is not None:
                        self._save(job, data, update)
            newest = max((job.created for job, _, _ in rows), default=None)
            self._youngest = None if newest is None else time.time() - newest
        if rows:
            self.chains.refresh([job for job, _, _ in rows])
            self.queue_view.annotate_pending()

    def _save(self, job: Job, data: dict[str, Any], update: JobUpdate) -> Job:
        updated = _apply(job, update)
        changes: dict[str, Any] = {}
        for field in (
            "state",
            "state_reason",
            "backend_id",
            "started",
            "ended",
            "exit_code",
            "ranks",
            "events",
        ):
            if getattr(updated, field) != getattr(job, field):
                changes[field] = getattr(updated, field)
        if update.data is not None:
            state = state_class(job.orchestrator)
            changes["data"] = state.load(data).merged(update.data).stored()
        self.store.update(job.id, **changes)
        return updated

    def jobs(
        self, *, states: Sequence[JobState] | None = None, limit: int = 100, offset: int = 0
    ) -> JobList:
        if not 1 <= limit <= 1000:
            raise InvalidRequest("limit must be between 1 and 1000", field="limit")
        if offset < 0:
            raise InvalidRequest("offset cannot be negative", field="offset")
        self._watch()
        rows, total = self.store.query(
            orchestrator=self.orchestrator.kind,
            cluster=self.cluster_name,
            user=self.settings.user,
            states=list(states) if states else None,
            limit=limit,
            offset=offset,
        )
        return self._mark_stale(
            JobList(
                jobs=[self._mark_stale(self._with_progress(job, data)) for job, _, data in rows],
                total=total,
            )
        )

    def _get(self, job_id: str, *, connected: bool = True) -> tuple[Job, dict[str, Any]]:
        """The stored job and its backend data. A job is bound to the cluster it was submitted
        to: unless `connected` is False (reading its record), one of another cluster than the
        connected one raises NotConnected, so that nothing reaches the wrong cluster."""
        check_text(job_id, field="id", what="the job id")  # what the store cannot even look up
        found = self.store.get(job_id)
        if found is None or found[0].user != self.settings.user:
            raise NotFound(f"no job '{job_id}' on this cluster", field="id")
        job, cluster, data = found
        if connected and self._elsewhere(job, cluster):
            raise NotConnected(self._elsewhere(job, cluster) or "", field="id")
        return job, data

    def _elsewhere(self, job: Job, cluster: str) -> str | None:
        """Why a job is not on the connected cluster (None when it is)."""
        if job.orchestrator == self.orchestrator.kind and cluster == self.cluster_name:
            return None
        return (
            f"job '{job.id}' belongs to the {job.orchestrator} cluster '{cluster}', and this "
            f"server is connected to the {self.orchestrator.kind} cluster '{self.cluster_name}': "
            f"connect to '{cluster}' again to follow, cancel or read it"
        )

    def job(self, job_id: str) -> Job:
        job, data = self._get(job_id, connected=False)
        found = self.store.get(job_id)
        elsewhere = self._elsewhere(job, found[1]) if found else None
        if elsewhere:
            # Its record, as last seen: no refresh reaches a cluster we are not connected to.
            if job.state.finished:
                return job
            return job.model_copy(update={"stale_reason": elsewhere, "stale_since": job.started})
        if not job.state.finished:
            self._watch()
            job, data = self._get(job_id)
        return self._mark_stale(self._with_progress(job, data))

    PROGRESS_MAX_AGE = 2.0
    """Seconds a job's parsed progress is reused (read again by the next status refresh)."""

    def _with_progress(self, job: Job, data: dict[str, Any]) -> Job:
        """A running job with its last known progress: readers never read a log or MLflow
        (the tracker's refresh does, `_refresh_progress`), they take what it found. A job the
        cluster's operator judged (its own hang/slow verdict, decided by the backend) shows it."""
        verdict = BackendState.load(data).operator_verdict
        if verdict:
            job = job.model_copy(update={"operator_verdict": verdict})
        if job.state != JobState.RUNNING:
            return job
        progress = self._progress.get(job.id)
        update: dict[str, Any] = {"watchdog": self.watch.of(job.id)}
        if progress:
            update["progress"] = progress
        return job.model_copy(update=update)

    def _refresh_watch(self) -> None:
        """In the tracker's thread: every running job's step clocks, hang and stragglers."""
        rows, _ = self.store.query(
            orchestrator=self.orchestrator.kind,
            cluster=self.cluster_name,
            user=self.settings.user,
            states=[JobState.RUNNING],
        )
        self.watch.refresh([(job, data) for job, _, data in rows])

    def _watch_reader(self, job: Job, data: dict[str, Any], rank: int) -> LogReader:
        reader = self.orchestrator.log_reader(_stored(job, data), rank)
        if isinstance(reader, FileLogReader):  # a symlink planted in the partition stays inside
            reader.guard = self.partition.guard(reader.path, shown=f"the log of rank {rank}")
        return reader

    STACKS_FILE = "stacks.json"

    def dump_stacks(self, job_id: str) -> StackDump:
        """py-spy dump of every rank of a running job, frames that differ marked; stored in
        the job's directory (the last dump: `stacks`)."""
        job, data = self._get(job_id)
        if job.state != JobState.RUNNING:
            raise InvalidRequest(
                f"job '{job_id}' is {job.state.value}: only a running job has stacks", field="id"
            )
        # A backend dumps every rank at once (Slurm: one srun) or one rank at a time (local).
        dump_all = getattr(self.orchestrator, "dump_stacks", None)
        dump_stack = getattr(self.orchestrator, "dump_stack", None)
        if dump_all is None and dump_stack is None:
            raise InvalidRequest(
                f"the {self.orchestrator.kind} backend cannot dump stacks yet", field="id"
            )
        nodes = {info.rank: info.node for info in job.ranks}
        every = dump_all(_stored(job, data)) if dump_all is not None else {}
        ranks = []
        for rank in range(job.spec.world_size):
            if dump_all is not None:
                found = every.get(rank) or RankStack(
                    rank=rank, error="no process of this rank was found on its node"
                )
            elif dump_stack is not None:
                found = dump_stack(_stored(job, data), rank)
            else:  # unreachable: one of the two exists
                continue
            if not found.node:
                found = found.model_copy(update={"node": nodes.get(rank)})
            ranks.append(found)
        dump = StackDump(job_id=job.id, taken_at=time.time(), ranks=mark_differences(ranks))
        path = self.partition.resolve(f"{JOBS_DIR}/{job_id}/{self.STACKS_FILE}", field="id")
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(dump.model_dump_json(), encoding="utf-8")
        os.replace(temporary, path)
        return dump

    def stacks(self, job_id: str) -> StackDump:
        """The job's last stack dump, as stored with it."""
        self._get(job_id, connected=False)
        path = self.partition.resolve(f"{JOBS_DIR}/{job_id}/{self.STACKS_FILE}", field="id")
        if not path.is_file():
            raise NotFound(f"no stacks of job '{job_id}' yet: dump them first", field="id")
        return StackDump.model_validate_json(path.read_text(encoding="utf-8"))

    def _watchdog_cancel(self, job_id: str, evidence: str) -> None:
        """The watchdog's auto-cancel: cancelled, with its evidence in the job's history."""
        job, data = self._get(job_id)
        if job.state.finished:
            return
        update = self.orchestrator.cancel(_stored(job, data))
        update.state = JobState.CANCELLED
        update.state_reason = evidence
        update.events = [*(update.events or job.events), f"watchdog: {evidence}"]
        self._save(job, data, update)

    def _refresh_progress(self) -> None:
        """In the tracker's thread, after a status refresh: the progress of every running job
        whose last reading is older than PROGRESS_MAX_AGE: what the cluster reports, else parsed
        from the last lines of rank 0's log (or read from its MLflow run)."""
        rows, _ = self.store.query(
            orchestrator=self.orchestrator.kind,
            cluster=self.cluster_name,
            user=self.settings.user,
            states=[JobState.RUNNING],
        )
        self._progress.keep_only(job.id for job, _, _ in rows)
        for job, _, data in rows:
            self._progress.read(job.id, functools.partial(self._read_progress, job, data))

    def _read_progress(self, job: Job, data: dict[str, Any]) -> Any:
        reported = self.orchestrator.reported_progress(job, data)
        if reported is not None:  # the cluster's own figure (a TrainJob's trainer) wins
            return reported
        parser = self.adapters.progress
        try:
            reader = self.orchestrator.log_reader(_stored(job, data), 0)
            try:
                text = reader.tail(parser.tail_lines)[0].decode("utf-8", "replace")
            finally:
                reader.close()
            progress = parser.of_log(text, started=job.started)
        except Exception as error:  # a log not there yet, a backend hiccup: no progress
            log.debug("no progress for %s: %s", job.id, error)
            progress = None
        return progress if progress is not None else self._mlflow_progress(job, data)

    MLFLOW_PROGRESS_MAX_AGE = 10.0
    """Seconds between MLflow reads for a job whose log tells no progress."""

    def _mlflow_progress(self, job: Job, data: dict[str, Any]) -> Any:
        """The progress the job's MLflow run tells (last step of its loss, its total steps)."""

        def read() -> Any:
            try:
                uri = self.mlflow_uri_for_server(BackendState.load(data).mlflow_uri)
                return self.adapters.progress.from_mlflow(uri, job.id, started=job.started)
            except Exception as error:  # MLflow down or slow: the list still answers
                log.debug("no MLflow progress for %s: %s", job.id, error)
                return None

        return self._mlflow_progress_cache.read(job.id, read)

    def forget(self, job_id: str, *, delete_files: bool = False) -> ForgottenJob:
        """Remove a job from the history (cancelled first if it still runs); its directory
        (`.hyperpod/jobs/<id>`: logs, launch files) is deleted only when asked. The outputs it
        wrote elsewhere in the partition are never touched."""
        job, _ = self._get(job_id)
        cancelled = False
        if not job.state.finished:
            self.cancel(job_id)
            cancelled = True
        relative = f"{JOBS_DIR}/{job_id}"
        deleted = False
        if delete_files:
            import shutil

            path = self.partition.resolve(relative, field="delete_files")
            if path.is_dir():
                shutil.rmtree(path)
                deleted = True
            self.snapshots.remove(job_id)  # and the objects no other job's snapshot names
        self.store.delete(job_id)
        self._progress.drop(job_id)
        return ForgottenJob(id=job_id, cancelled=cancelled, files_deleted=deleted, job_dir=relative)

    def cancel(self, job_id: str) -> Job:
        job, data = self._get(job_id)
        if job.state.finished:
            return job
        held = self.chains.cancel_held(job)  # never started: cancelled in the store only
        if held is not None:
            self.tracker.nudge(now=True)
            return held
        update = self.orchestrator.cancel(_stored(job, data))
        if update.state is None or not update.state.finished:
            update.state = JobState.CANCELLED
        saved = self._save(job, data, update)
        self.tracker.nudge(now=True)  # the feed's listeners hear it now, as after a submit
        return saved

    def _cancel_with(self, job: Job, reason: str) -> Job:
        """Cancel a started job on the cluster with our reason (a chain's failed link)."""
        job, data = self._get(job.id)
        if job.state.finished:
            return job
        update = self.orchestrator.cancel(_stored(job, data))
        update.state = JobState.CANCELLED
        update.state_reason = reason
        update.events = [*(update.events or job.events), f"cancelled: {reason}"]
        return self._save(job, data, update)

    # -- chains (#24 item 4; core/chains.py, core/chain_service.py) -------------------------
    def submit_chain(self, request: Any) -> ChainSubmitted:
        """Submit every link of a chain (`POST jobs/chain`): each waits for its `after`."""
        return self.chains.submit_chain(chain_request(request))

    def chain(self, job_id: str) -> JobChain:
        """Every job linked to this one by `after`, oldest first."""
        job, _ = self._get(job_id, connected=False)
        return self.chains.chain(job)

    def resume(self, job_id: str, *, with_changes: bool = False) -> ChainSubmitted:
        """Run a chain again from its failed link: that link and what waited on it."""
        job, _ = self._get(job_id)
        return self.chains.resume(job, with_changes=with_changes)

    def add_event(self, job_id: str, event: str) -> Job:
        """Add one line to the job's events (kept with the backend's, the last EVENTS_KEPT)."""
        try:
            line = JobEventRequest(event=event).event
        except ValidationError as error:
            raise validation_error(error) from None
        job, _ = self._get(job_id, connected=False)
        events = [*job.events, line][-EVENTS_KEPT:]
        self.store.update(job_id, events=events)
        return job.model_copy(update={"events": events})

    # -- the cluster's queue (every user's jobs; core/queue_view.py) ----------------------
    _queue_view: QueueView | None = None

    @property
    def queue_view(self) -> QueueView:
        """The queue snapshot, filters, pending explanations and adoption (`QueueView`)."""
        if self._queue_view is None:
            self._queue_view = QueueView(self)
        return self._queue_view

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

    # -- logs and metrics ----------------------------------------------------------------
    def _check_rank(self, job: Job, rank: int) -> None:
        if not 0 <= rank < job.spec.world_size:
            raise InvalidRequest(
                f"rank must be between 0 and {job.spec.world_size - 1}", field="rank"
            )

    def log_reader(self, job_id: str, rank: int = 0) -> LogReader:
        job, data = self._get(job_id)
        self._check_rank(job, rank)
        reader = self.orchestrator.log_reader(_stored(job, data), rank)
        if isinstance(reader, FileLogReader):  # a symlink planted in the partition stays inside
            reader.guard = self.partition.guard(reader.path, shown=f"the log of rank {rank}")
        return reader

    def logs(self, job_id: str, *, rank: int = 0, tail: int = 200) -> LogSnapshot:
        if not 0 <= tail <= MAX_TAIL_LINES:
            raise InvalidRequest(f"tail must be between 0 and {MAX_TAIL_LINES}", field="tail")
        reader = self.log_reader(job_id, rank)
        try:
            if self._get(job_id)[0].state.finished:
                settle(reader)  # the whole log of a finished job, as the follow loop sends it
            data, start, end = reader.tail(tail)
        finally:
            reader.close()
        return LogSnapshot(
            rank=rank,
            text=data.decode("utf-8", "replace"),
            start_offset=start,
            offset=end,
            truncated=start > 0,
        )

    # -- diagnosis -----------------------------------------------------------------------
    def diagnose(self) -> Diagnosis:
        """The login-node checks of the orchestrator in use, run where this core runs: what it
        uses (orchestrator, file system root, partition: the words of `GET cluster`), then the
        backend's own checks (`Orchestrator.diagnose`), AWS, MLflow and the GPU metrics."""
        from .diagnose import login_node_checks

        kind = self.orchestrator.kind
        checks = login_node_checks(
            self.settings,
            kind=kind,
            traits=self.orchestrator,
            fs_root=self.fs_root,
            partition=self.partition.root,
            mlflow_uri=self.mlflow_uri_for_server(),
            backend=self.orchestrator.diagnose,
            extra=[("GPU metrics", self._gpu_check)],
        )
        where = "the Jupyter server" if self.server_root is not None else "this process"
        return Diagnosis(
            ok=all(check.status != "fail" for check in checks),
            orchestrator=kind,
            where=f"{where} (pid {os.getpid()}, user {self.settings.user})",
            checks=checks,
        )

    def _gpu_check(self) -> DiagnosticCheck:
        """The GPU metrics endpoint answers PromQL and has DCGM series (or the local GPUs read)."""
        status, detail, fix = self.adapters.check_gpu(
            self.settings, this_machine=self.orchestrator.jobs_run_here
        )
        return DiagnosticCheck.model_validate(
            {"name": "GPU metrics", "status": status, "detail": detail, "fix": fix}
        )

    def follow(
        self,
        job_id: str,
        *,
        rank: RankArg = 0,
        offset: int = 0,
        offsets: Mapping[int, int] | None = None,
    ) -> Iterator[LogEvent]:
        """The log stream's events, read from the backend in this process (same protocol)."""
        job = self.job(job_id)
        ranks = list(range(job.spec.world_size)) if rank == "all" else [int(rank)]
        given = dict(offsets or {})
        if rank != "all":
            given.setdefault(int(rank), offset)
        positions = {r: int(given.get(r, 0)) for r in ranks}
        heartbeat = float(self.settings.heartbeat_interval)
        return follow_events(Follow(self, job_id, positions, heartbeat_every=heartbeat))

    def metrics(self, job_id: str) -> JobMetrics:
        job, data = self._get(job_id)
        facts = BackendState.load(data)
        uri = self.mlflow_uri_for_server(facts.mlflow_uri)
        found = self.adapters.job_metrics(uri, job.id)
        if found.run is None and facts.adopted and job.backend_id:
            # A job submitted elsewhere tags its run with the cluster's id, if with anything.
            by_backend = self.adapters.job_metrics(uri, job.backend_id)
            if by_backend.run is not None:
                return by_backend
        return found

    # -- comparing jobs (#24 item 2) ---------------------------------------------------------
    def diff(self, job_id: str, other_id: str) -> JobDiff:
        """What differs between two jobs: spec, resolved configs, code files, packages."""
        return self.comparer.diff(job_id, other_id)

    def compare(self, job_ids: Sequence[str]) -> JobComparison:
        """Two to ten jobs side by side: state, duration, what sets them apart, final metrics."""
        return self.comparer.compare(job_ids)

    # -- GPU metrics (DCGM series in Prometheus/AMP/Grafana; NVML or nvidia-smi locally) ------
    _gpu: GpuReader | None = None

    @property
    def gpu(self) -> GpuReader:
        """The GPU metrics reader, made on first use."""
        if self._gpu is None:
            self._gpu = self.adapters.gpu(self.settings)
        return self._gpu

    def gpu_nodes(self) -> GpuNodes:
        """Each node's GPUs now; no source: none, with the reason."""
        return self.gpu.nodes(this_machine=self.orchestrator.jobs_run_here)

    def job_gpu(self, job_id: str, *, step: float | None = None) -> JobGpu:
        """The job's GPU utilisation and memory over its run."""
        if step is not None and not 1 <= step <= 3600:
            raise InvalidRequest("step must be between 1 and 3600 seconds", field="step")
        job, data = self._get(job_id)
        if not job.state.finished:
            self.refresh()
            job, data = self._get(job_id)
        return self.gpu.job(job, self.orchestrator.gpu_placement(job, data), step=step)


@contextmanager
def _aws_denied() -> Iterator[None]:
    """AWS refusals get their own code, so that clients do not take them for a Jupyter login."""
    try:
        yield
    except Forbidden as error:
        raise AwsDenied(error.message, field=error.field) from error


def _boto3_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("boto3") is not None


def _stored(job: Job, data: dict[str, Any]) -> StoredJob:
    """What a backend sees of a stored job: its data as the backend's typed `State`."""
    return StoredJob(
        id=job.id,
        spec=job.spec,
        state=job.state,
        backend_id=job.backend_id,
        created=job.created,
        started=job.started,
        data=state_class(job.orchestrator).load(data),
        events=list(job.events),
    )


def _apply(job: Job, update: JobUpdate) -> Job:
    changes: dict[str, Any] = {}
    for field in ("state", "backend_id", "started", "ended", "exit_code", "ranks", "events"):
        value = getattr(update, field)
        if value is not None:
            changes[field] = value
    if update.state_reason is not None or (update.state is not None and update.state != job.state):
        changes["state_reason"] = update.state_reason
    if changes.get("state") in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED) and not (
        changes.get("ended") or job.ended
    ):
        changes["ended"] = time.time()
    return job.model_copy(update=changes)


def _job_name(name: str) -> str:
    """A file's job name as a job name of ours (RFC 1123, at most 52 characters)."""
    import re

    cleaned = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:52].strip("-")
    return cleaned or "job"
