"""HyperPod on EKS (or any Kubernetes with the Kubeflow training operator) as an `Orchestrator`."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from typing import Any, ClassVar

from traitlets import Bool, Enum, Float, List, Unicode, default

from ...core.api import DiagnosticCheck
from ...core.backend import (
    GpuPlacement,
    JobUpdate,
    Launch,
    LogReader,
    Orchestrator,
    RenderedJob,
    StoredJob,
    ranks_nodes,
)
from ...core.byo import FileContext, PreparedFile
from ...core.environment import paths_of, service_account
from ...core.errors import Conflict, Forbidden, HyperPodError, InvalidRequest, NotFound
from ...core.models import (
    Capabilities,
    Job,
    JobProgress,
    JobState,
    Node,
    OperatorVerdict,
    RankStack,
    WatchCacheStatus,
    WatchedResource,
)
from ...core.queue import Adoption, QueueJob, QueueSnapshot
from . import queue as cluster_queue
from .cache import ClusterCache, PodRecord
from .client import KubeClient
from .governance import KindDiscovery, TaskGovernance
from .jobs import (
    OWN_EVENTS_KEPT,
    format_events,
    is_cluster_event,
    job_name_of_pod,
    job_update,
    pod_problem,
    rank_of_pod,
    timestamp,
)
from .kueue import explain_queued, queued
from .logs import FollowerPool, PodLogFollower, SpoolLogReader
from .manifest import (
    CONTAINER,
    HYPERPOD,
    JOB_ID_LABEL,
    JOB_KINDS,
    KUBEFLOW,
    MANAGED_BY,
    MANAGER,
    ManifestOptions,
    build_manifest,
    job_kind,
    retries,
    split_ranks,
    to_yaml,
)
from .nodes import EFA_RESOURCE, GPU_RESOURCES, allocated_by_node, node_from_k8s
from .operator_verdict import operator_verdict
from .state import KubernetesState
from .trainjob import TRAINER, USER_KINDS, prepare_user_manifest
from .user_manifest import UserManifestPolicy

log = logging.getLogger(__name__)

SELECTOR_CHUNK = 50
# A job object missing from the list this long after submission was deleted outside of us.
MISSING_GRACE_S = 15.0


class KubernetesOrchestrator(Orchestrator):
    kind: ClassVar[Any] = "kubernetes"
    State = KubernetesState
    needs_aws = True
    job_python = "image"

    @classmethod
    def reported_progress(cls, job: Job, data: dict[str, Any]) -> JobProgress | None:
        """A TrainJob's trainerStatus, as the last refresh kept it (queue.py, trainjob.py)."""
        stored = KubernetesState.load(data).trainer_progress
        if not stored:
            return None
        elapsed = time.time() - job.started if job.started else None
        return JobProgress.model_validate({**stored, "elapsed_seconds": elapsed})

    @classmethod
    def gpu_placement(cls, job: Job, data: dict[str, Any]) -> GpuPlacement:
        """The job's pods, by name (`<job>-<replica type>-<index>`, as the training operators
        name them) in its namespace: a pod's GPUs are the job's wherever it was placed."""
        name = re.escape(job.backend_id or job.id)
        namespace = KubernetesState.load(data).namespace or job.spec.namespace
        return GpuPlacement(
            nodes=ranks_nodes(job), pod_pattern=f"{name}-[a-z]+-[0-9]+", namespace=namespace or None
        )

    default_cluster_fs_root: ClassVar[str | None] = "/data"

    kubeconfig = Unicode(
        "", config=True, help="kubeconfig file; default: $KUBECONFIG, else ~/.kube/config."
    )
    context = Unicode("", config=True, help="kubeconfig context; default: the current context.")
    namespace = Unicode(
        "default",
        config=True,
        help="Namespace jobs are created in unless the job asks for another allowed one. "
        "Default: a HyperPod Space's own (its service account's), else 'default'.",
    )

    @default("namespace")
    def _default_namespace(self) -> str:
        settings = getattr(self, "settings", None) or self.parent
        account = service_account(paths_of(settings))
        return account.namespace if account is not None and account.namespace else "default"

    allowed_namespaces = List(
        Unicode(),
        default_value=[],
        config=True,
        help="Namespaces a job may ask for; default: only `namespace`.",
    )
    job_kind = Enum(
        ["auto", *JOB_KINDS],
        default_value="auto",
        config=True,
        help="HyperPodPyTorchJob (sagemaker.amazonaws.com/v1) or PyTorchJob (kubeflow.org/v1); "
        "auto: HyperPodPyTorchJob when the cluster serves it, else PyTorchJob. A job may pick "
        "the other.",
    )
    image = Unicode("", config=True, help="Container image for jobs whose spec names none.")
    run_as_partition_owner = Bool(
        False,
        config=True,
        help="Run the pods as the owner (uid, gid) of the job's partition: securityContext "
        "runAsUser, runAsGroup and fsGroup, so that what jobs write is the IDE user's.",
    )
    image_pull_policy = Enum(
        ["Always", "IfNotPresent", "Never"],
        default_value="Always",
        config=True,
        help="imagePullPolicy of the workers.",
    )
    pvc_name = Unicode(
        "fsx-claim",
        config=True,
        help="PersistentVolumeClaim of the shared file system, mounted at the cluster FS root.",
    )
    service_account = Unicode(
        "", config=True, help="serviceAccountName of the workers (e.g. eks-hyperpod-sa)."
    )
    shm_size = Unicode(
        "",
        config=True,
        help="Size of /dev/shm as a memory emptyDir (e.g. 64Gi); empty: the host's /dev/shm.",
    )
    cluster_display_name = Unicode(
        "",
        config=True,
        help="Name shown for the cluster; default: the HyperPod cluster, else the context.",
    )
    hyperpod_cluster = Unicode(
        "",
        config=True,
        help="HyperPod cluster name or ARN, for AWS details; default: found from the EKS context.",
    )
    aws_region = Unicode(
        "",
        config=True,
        help="AWS region for discovery; default: from the context's ARN or the AWS config.",
    )
    fsx_file_system_id = Unicode(
        "", config=True, help="FSx for Lustre file system id; default: from Studio's mount path."
    )
    node_cache_seconds = Float(
        5.0, config=True, help="How long a direct node listing is reused (no watch cache)."
    )
    watch_cache = Bool(
        True,
        config=True,
        help="Keep nodes and pods in memory by list + watch (the informer pattern) instead of "
        "listing them per request; needs list/watch on nodes and pods cluster-wide (without "
        "it, requests list directly).",
    )
    watch_timeout = Float(
        300.0,
        config=True,
        help="Seconds a watch asks the API server to run before it is renewed (times a random "
        "factor in [1, 2), like client-go's reflector).",
    )

    user_host_paths = List(
        Unicode(),
        default_value=[],
        config=True,
        help="Host paths a user's own manifest may mount (besides /dev/shm), e.g. "
        "/mnt/k8s-disks/0 (`jupyter hyperpod apply`).",
    )
    user_service_accounts = List(
        Unicode(),
        default_value=[],
        config=True,
        help="Service accounts a user's own manifest may name; default: only `service_account`.",
    )

    def __init__(self, *, settings: Any, **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.kube = KubeClient(
            kubeconfig=self.kubeconfig,
            context=self.context,
            in_cluster=service_account(paths_of(settings)),
        )
        self.followers = FollowerPool()
        """Every rank's log follower, ours and adopted jobs' (logs.py)."""
        self.reviews = cluster_queue.AccessReviews(self.kube)
        """What this user may list and read, asked of the API (queue.py)."""
        self._nodes_cache: tuple[float, list[Node]] | None = None
        self._details_cache: tuple[float, dict[str, Any]] | None = None
        self._kinds = KindDiscovery(self.kube)
        self._governance = TaskGovernance(self.kube)
        self._cache = ClusterCache(self.kube, watch_timeout=self.watch_timeout)
        # Per node: (its resourceVersion, what pods hold of it, the Node) -- rebuilt on change.
        self._node_memo: dict[str, tuple[Any, Any, Node]] = {}
        self._nodes_view: tuple[tuple[int, int], list[Node]] | None = None

    # -- cluster ------------------------------------------------------------------------------
    def cluster_name(self) -> str:
        if self.cluster_display_name:
            return self.cluster_display_name
        if self.hyperpod_cluster:
            return self.hyperpod_cluster.rsplit("/", 1)[-1]
        try:
            _ = self.kube.api_client
        except HyperPodError:
            return self.context or "kubernetes"
        name = self.kube.context_name or self.kube.host or "kubernetes"
        return name.rsplit("/", 1)[-1] if name.startswith("arn:") else name

    def capabilities(self) -> Capabilities:
        return Capabilities(
            cancel=True,
            follow_logs=True,
            per_rank_logs=True,
            metrics=True,
            multi_node=True,
            gpus=True,
            job_kinds=list(JOB_KINDS),
            render_format="manifest",
        )

    def details(self) -> dict[str, Any]:
        now = time.monotonic()
        if self._details_cache and now - self._details_cache[0] < 300:
            return self._details_cache[1]
        details: dict[str, Any] = {
            "context": self.kube.context_name or self.context or None,
            "namespace": self.namespace,
            "allowed_namespaces": self.allowed_namespaces or [self.namespace],
            "job_kind": self.default_kind,
            "pvc_name": self.pvc_name,
            "cluster_fs_root": self.fs_mount,
        }
        try:
            _ = self.kube.api_client
            details["api_server"] = self.kube.host
        except HyperPodError as exc:
            details["api_error"] = exc.message
        # Task governance choices (Kueue), read from the cluster: None where it has no Kueue.
        namespaces = list(self.allowed_namespaces or [self.namespace])
        details["local_queues"] = self._governance.local_queues(namespaces)
        details["priority_classes"] = self._governance.priority_classes()
        details.update(self._aws_details())
        self._details_cache = (now, details)
        return details

    def _aws_details(self) -> dict[str, Any]:
        from ...aws import discovery

        return discovery.cluster_details(
            hyperpod_cluster=self.hyperpod_cluster,
            context=self.kube.context_name or self.context,
            region=self.aws_region,
            fsx_file_system_id=self.fsx_file_system_id,
            shared_fs_root=getattr(self.settings, "shared_fs_root", ""),
            studio_metadata_path=getattr(self.settings, "studio_metadata_path", ""),
        )

    @property
    def fs_mount(self) -> str:
        return (
            getattr(self.settings, "cluster_fs_root", "") or self.default_cluster_fs_root or "/data"
        )

    def list_nodes(self) -> list[Node]:
        """From the watch cache (cache.py) while it is fresh, else by listing."""
        if self.watch_cache:
            self._cache.start()
            if self._cache.nodes.fresh:
                return self._nodes_from_cache()
        return self._list_nodes_direct()

    def start_watch_cache(self) -> None:
        """Start listing and watching nodes and pods (cache.py) if no read has started it yet."""
        self._cache.start()

    def cache_status(self) -> dict[str, Any]:
        """The watch cache: per resource synced, connected, staleness, relists, error."""
        return self._cache.status()

    def watch_cache_status(self) -> WatchCacheStatus:
        """`cache_status()` typed, for `GET cluster` and doctor."""
        status = self._cache.status()
        nodes, pods = WatchedResource(**status["nodes"]), WatchedResource(**status["pods"])
        return WatchCacheStatus(
            enabled=self.watch_cache,
            started=self._cache.started,
            fresh=self._cache.nodes.fresh and self._cache.pods.fresh,
            nodes=nodes,
            pods=pods,
            warning_events={
                namespace: WatchedResource(**watched)
                for namespace, watched in status["warning_events"].items()
            },
        )

    def _nodes_from_cache(self) -> list[Node]:
        records, node_version = self._cache.nodes.items()
        pod_version = -1
        if self._cache.pods.fresh:
            pods, pod_version = self._cache.pods.items()
            view = self._nodes_view
            if view is not None and view[0] == (node_version, pod_version):
                return view[1]
            allocated = _allocated(pods)
        else:
            try:
                listed = self.kube.list_all(
                    "list pods on all namespaces (for GPUs in use)",
                    self.kube.core.list_pod_for_all_namespaces,
                    field_selector="status.phase!=Succeeded,status.phase!=Failed",
                )
            except Forbidden:
                listed = []
            allocated = allocated_by_node(listed, [*GPU_RESOURCES, EFA_RESOURCE])
        memo: dict[str, tuple[Any, Any, Node]] = {}
        result = []
        for record in records:
            name = record["metadata"]["name"]
            holds = allocated.get(name)
            key = tuple(sorted(holds.items())) if holds else ()
            known = self._node_memo.get(name)
            version = record["metadata"]["resourceVersion"]
            if known is not None and known[0] == version and known[1] == key:
                node = known[2]
            else:
                node = node_from_k8s(record, holds)
            memo[name] = (version, key, node)
            result.append(node)
        result.sort(key=lambda node: node.name)
        self._node_memo = memo
        if pod_version >= 0:
            self._nodes_view = ((node_version, pod_version), result)
        return result

    def _list_nodes_direct(self) -> list[Node]:
        cached = self._nodes_cache
        if cached and time.monotonic() - cached[0] < self.node_cache_seconds:
            return cached[1]
        nodes = self.kube.list_all("list nodes", self.kube.core.list_node)
        try:
            pods = self.kube.list_all(
                "list pods on all namespaces (for GPUs in use)",
                self.kube.core.list_pod_for_all_namespaces,
                field_selector="status.phase!=Succeeded,status.phase!=Failed",
            )
        except Forbidden:
            # Reading pods cluster-wide is often not granted: show capacity without usage.
            pods = []
        allocated = allocated_by_node(pods, [*GPU_RESOURCES, EFA_RESOURCE])
        result = [
            node_from_k8s(obj, allocated.get((obj.get("metadata") or {}).get("name", "")))
            for obj in nodes
        ]
        result.sort(key=lambda node: node.name)
        self._nodes_cache = (time.monotonic(), result)
        return result

    # -- jobs ---------------------------------------------------------------------------------
    @property
    def default_kind(self) -> str:
        """The configured kind, or with `auto` the HyperPod kind unless the cluster is known to
        lack it (then Kubeflow's, when it serves that)."""
        if self.job_kind != "auto":
            return str(self.job_kind)
        if self._kinds.serves(HYPERPOD) is False and self._kinds.serves(KUBEFLOW) is not False:
            return KUBEFLOW[3]
        return HYPERPOD[3]

    def task_governance(self) -> dict[str, Any]:
        """The Kueue queues (by allowed namespace) and priority classes jobs may name."""
        namespaces = list(self.allowed_namespaces or [self.namespace])
        return {
            "local_queues": self._governance.local_queues(namespaces),
            "priority_classes": self._governance.priority_classes(),
        }

    def manifest_options(self, governance: bool = True) -> ManifestOptions:
        namespaces = list(self.allowed_namespaces or [self.namespace])
        return ManifestOptions(
            local_queues=self._governance.local_queues(namespaces) if governance else None,
            priority_classes=self._governance.priority_classes() if governance else None,
            namespace=self.namespace,
            kind=self.default_kind,
            image=self.image,
            pvc_name=self.pvc_name,
            fs_mount=self.fs_mount,
            service_account=self.service_account,
            shm_size=self.shm_size,
            image_pull_policy=self.image_pull_policy,
            python=getattr(self.settings, "cluster_python", "") or "python3",
            allowed_namespaces=list(self.allowed_namespaces),
            run_as_partition_owner=self.run_as_partition_owner,
            watchdog_settings=self.settings,
        )

    def render(self, launch: Launch) -> RenderedJob:
        manifest = build_manifest(launch, self.manifest_options())
        warnings: list[str] = []
        spec = launch.spec
        if spec.efa_per_node and not spec.gpus_per_node:
            warnings.append("EFA is requested without GPUs: EFA devices sit on GPU instances")
        if spec.auto_resume and not spec.max_retries:
            warnings.append(
                f"auto-resume retries up to {retries(spec)} times (set max_retries to change it)"
            )
        return RenderedJob(
            format="manifest", language="yaml", text=to_yaml(manifest), warnings=warnings
        )

    def submit(self, launch: Launch) -> JobUpdate:
        manifest = build_manifest(launch, self.manifest_options())
        group, version, plural, kind = job_kind(manifest["kind"], self.default_kind)
        namespace = manifest["metadata"]["namespace"]
        try:
            self.kube.call(
                f"create {kind} {launch.job_id} in namespace {namespace}",
                self.kube.custom.create_namespaced_custom_object,
                group,
                version,
                namespace,
                plural,
                manifest,
            )
        except Conflict:
            raise Conflict(
                f"a {kind} named '{launch.job_id}' already exists in namespace {namespace}",
                field="name",
            ) from None
        except NotFound as exc:
            raise InvalidRequest(
                f"the cluster does not serve {kind} ({group}/{version}): is its training operator "
                f"installed? ({exc.message})",
                field="kind",
            ) from exc
        return JobUpdate(
            state=JobState.PENDING,
            backend_id=launch.job_id,
            data=KubernetesState(
                namespace=namespace,
                kind=kind,
                group=group,
                version=version,
                plural=plural,
                workers=launch.spec.nodes,
                split_ranks=split_ranks(launch.spec, kind),
                job_dir_local=str(launch.job_dir_local),
            ),
        )

    # -- the user's own manifests (user_manifest.py) ---------------------------------------
    def user_policy(self, context: FileContext) -> UserManifestPolicy:
        owner = None
        if self.run_as_partition_owner:
            from ...admin.owner import pod_security_context

            found = pod_security_context(context.job_dir_local)
            if found:
                owner = {"runAsUser": found["runAsUser"], "runAsGroup": found["runAsGroup"]}
        accounts = list(self.user_service_accounts) or (
            [self.service_account] if self.service_account else []
        )
        return UserManifestPolicy(
            namespace=self.namespace,
            allowed_namespaces=list(self.allowed_namespaces),
            pvc_name=self.pvc_name,
            fs_mount=self.fs_mount,
            host_paths=list(self.user_host_paths),
            service_accounts=accounts,
            run_as_owner=owner,
            serves_trainjob=lambda: self._kinds.serves(TRAINER),
        )

    def prepare_file(self, context: FileContext) -> PreparedFile:
        return prepare_user_manifest(context, self.user_policy(context))

    def submit_file(self, prepared: PreparedFile, context: FileContext) -> JobUpdate:
        group, version, plural, kind = USER_KINDS[str(prepared.kind)]
        manifest = prepared.payload
        name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
        events = []
        if context.replaces == name:
            # A resubmit of a job that has ended: its object (same name, ours) makes way.
            self._delete_ended(group, version, namespace, plural, kind, name)
            events.append(f"the ended {kind} {namespace}/{name} of the resubmitted job deleted")
        try:
            self.kube.call(
                f"create {kind} {name} in namespace {namespace}",
                self.kube.custom.create_namespaced_custom_object,
                group,
                version,
                namespace,
                plural,
                manifest,
            )
        except Conflict:
            raise Conflict(
                f"a {kind} named '{name}' already exists in namespace {namespace}: delete it "
                "(cancel its job) or rename this one (metadata.name)",
                field="metadata.name",
            ) from None
        except NotFound as exc:
            raise InvalidRequest(
                f"the cluster does not serve {kind} ({group}/{version}): is its training operator "
                f"installed? ({exc.message})",
                field="kind",
            ) from exc
        return JobUpdate(
            state=JobState.PENDING,
            backend_id=name,
            events=[
                *events,
                f"created {kind} {namespace}/{name} from {context.filename or 'your file'}",
            ],
            data=KubernetesState(
                namespace=namespace,
                kind=kind,
                group=group,
                version=version,
                plural=plural,
                workers=prepared.nodes,
                split_ranks=False,
                job_dir_local=str(context.job_dir_local),
                adopted=True,
            ),
        )

    def _delete_ended(
        self, group: str, version: str, namespace: str, plural: str, kind: str, name: str
    ) -> None:
        """Delete the object of an ended job and wait (10 s at most) until the API has it gone."""
        with contextlib.suppress(NotFound):
            self.kube.call(
                f"delete {kind} {name} in namespace {namespace}",
                self.kube.custom.delete_namespaced_custom_object,
                group,
                version,
                namespace,
                plural,
                name,
                propagation_policy="Background",
            )
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            try:
                self.kube.call_json(
                    f"read {kind} {name} in namespace {namespace}",
                    self.kube.custom.get_namespaced_custom_object,
                    group,
                    version,
                    namespace,
                    plural,
                    name,
                )
            except NotFound:
                return
            time.sleep(0.2)

    def _kind_of(self, job: StoredJob) -> tuple[str, str, str, str]:
        kind = _state(job).kind or job.spec.kind
        if kind in USER_KINDS:  # ours, or a user's own TrainJob (apply)
            return USER_KINDS[kind]
        return job_kind(kind, self.default_kind)

    def _namespace_of(self, job: StoredJob) -> str:
        return str(_state(job).namespace or job.spec.namespace or self.namespace)

    def refresh(self, jobs: list[StoredJob]) -> dict[str, JobUpdate]:
        if any(_state(job).adopted for job in jobs):  # created elsewhere: queue.py
            ours = [job for job in jobs if not _state(job).adopted]
            adopted = [job for job in jobs if _state(job).adopted]
            return {
                **(self.refresh(ours) if ours else {}),
                **cluster_queue.refresh_adopted(self.kube, adopted),
            }
        groups: dict[tuple[str, tuple[str, str, str, str]], list[StoredJob]] = {}
        for job in jobs:
            if job.backend_id:
                groups.setdefault((self._namespace_of(job), self._kind_of(job)), []).append(job)
        objects: dict[tuple[str, str], dict[str, Any]] = {}
        for (namespace, (group, version, plural, kind)), members in groups.items():
            # Only the jobs asked about, not the namespace's whole history of finished jobs.
            wanted = sorted({job.backend_id for job in members if job.backend_id})
            for start in range(0, len(wanted), SELECTOR_CHUNK):
                chunk = wanted[start : start + SELECTOR_CHUNK]
                items = self.kube.list_all(
                    f"list {kind}s in namespace {namespace}",
                    self.kube.custom.list_namespaced_custom_object,
                    group,
                    version,
                    namespace,
                    plural,
                    label_selector=f"{MANAGED_BY}={MANAGER},{JOB_ID_LABEL} in ({','.join(chunk)})",
                )
                for item in items:
                    meta = item.get("metadata") or {}
                    objects[(namespace, meta.get("name", ""))] = item

        pods_by_job: dict[tuple[str, str], list[dict[str, Any]]] = {}
        if self.watch_cache and groups:
            self._cache.start()
        for namespace in {ns for ns, _ in groups}:
            names = sorted(
                {
                    job.backend_id
                    for (ns, _), members in groups.items()
                    if ns == namespace
                    for job in members
                    if job.backend_id
                }
            )
            # The watch cache has every pod of our jobs while it is fresh: no list needed, except
            # for a job its object says has ended: its last pod states (exit codes, the failed
            # rank) are read from the API once, so that they cannot lag behind the object.
            cached = self._cache.job_pods(namespace, set(names)) if self.watch_cache else None
            if cached is not None:
                ended = {name for name in names if _ended(objects.get((namespace, name)))}
                for job_id, job_pods in cached.items():
                    if job_id not in ended:
                        pods_by_job[(namespace, job_id)] = job_pods
                names = sorted(ended)
            for start in range(0, len(names), SELECTOR_CHUNK):
                chunk = names[start : start + SELECTOR_CHUNK]
                pods = self.kube.list_all(
                    f"list the worker pods in namespace {namespace}",
                    self.kube.core.list_namespaced_pod,
                    namespace,
                    label_selector=f"{JOB_ID_LABEL} in ({','.join(chunk)})",
                )
                for pod in pods:
                    name = job_name_of_pod(pod)
                    if name in chunk:
                        pods_by_job.setdefault((namespace, name), []).append(pod)

        updates: dict[str, JobUpdate] = {}
        needs_events: dict[str, list[StoredJob]] = {}
        waiting: dict[str, list[tuple[str, dict[str, Any]]]] = {}  # Kueue's, by namespace
        now = time.time()
        for (namespace, _kind), members in groups.items():
            for job in members:
                obj = objects.get((namespace, job.backend_id or ""))
                if obj is None:
                    if now - job.created > MISSING_GRACE_S:
                        updates[job.id] = JobUpdate(
                            state=JobState.CANCELLED,
                            state_reason="the job object was deleted from the cluster",
                            ended=now,
                        )
                    continue
                pods = pods_by_job.get((namespace, job.backend_id or ""), [])
                update = job_update(obj, pods, faults=_state(job).faults)
                _with_operator_verdict(update, obj, _state(job).operator_verdict)
                updates[job.id] = update
                if update.state is JobState.PENDING and queued(obj):
                    waiting.setdefault(namespace, []).append((job.id, obj))
                # No log draining here: the status refresh never waits for a log. A follower
                # that sees the job finished waits for its log's end itself (`wait_complete`).
                # Events explain jobs that wait or failed; a healthy running job needs none.
                troubled = update.state is JobState.RUNNING and any(pod_problem(p) for p in pods)
                if update.state in (JobState.PENDING, JobState.FAILED) or troubled:
                    needs_events.setdefault(namespace, []).append(job)

        # Why Kueue holds a queued job: its Workload's conditions (kueue.py).
        workloads: dict[str, str] = {}
        for namespace, held in waiting.items():
            workloads.update(
                explain_queued(self._kinds.serves, self._list_workloads, namespace, held, updates)
            )
        if self.watch_cache:
            self._cache.forget_idle_warnings()
        for namespace, members in needs_events.items():
            involved_by_job: dict[str, set[str]] = {}
            for job in members:
                pod_names = {
                    (p.get("metadata") or {}).get("name", "")
                    for p in pods_by_job.get((namespace, job.backend_id or ""), [])
                }
                involved = {job.backend_id or "", workloads.get(job.id, ""), *pod_names}
                involved_by_job[job.id] = involved - {""}
            about = set().union(*involved_by_job.values())
            events = self._warning_events(namespace, about)
            if events is None:
                continue
            for job in members:
                involved = involved_by_job[job.id]
                by_object = format_events(events, involved)
                merged = sorted({text for texts in by_object.values() for text in texts})
                # The cluster's warnings replace the last ones; our own lines (the create, an
                # agent's action, a watchdog verdict) stay beside them.
                own = [line for line in job.events if not is_cluster_event(line, involved)]
                updates[job.id].events = [*own[-OWN_EVENTS_KEPT:], *merged[-10:]]
                if (
                    updates[job.id].state is JobState.PENDING
                    and not updates[job.id].state_reason
                    and merged
                ):
                    updates[job.id].state_reason = merged[-1]
        return updates

    def _warning_events(self, namespace: str, about: set[str]) -> list[dict[str, Any]] | None:
        """The warning events of `namespace` about the objects `about`: from the watch cache
        while it has them (a refresh costs the same however many events the namespace holds),
        else listed, and watched from then on; None where listing events is refused."""
        if self.watch_cache:
            cached = self._cache.warning_events(namespace, about)
            if cached is not None:
                return cached
        try:
            events = self.kube.list_all(
                f"list warning events in namespace {namespace}",
                self.kube.core.list_namespaced_event,
                namespace,
                field_selector="type=Warning",
            )
        except Forbidden:
            return None
        if self.watch_cache:
            self._cache.watch_warnings(namespace)
        return [e for e in events if e.get("type", "Warning") == "Warning"]

    def _list_workloads(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self.kube.list_all(
            f"list the Kueue Workloads in namespace {namespace}",
            self.kube.custom.list_namespaced_custom_object,
            "kueue.x-k8s.io",
            "v1beta1",
            namespace,
            "workloads",
            label_selector=selector,
        )

    def cancel(self, job: StoredJob) -> JobUpdate:
        group, version, plural, kind = self._kind_of(job)
        namespace = self._namespace_of(job)
        if job.backend_id:
            with contextlib.suppress(NotFound):
                self.kube.call(
                    f"delete {kind} {job.backend_id} in namespace {namespace}",
                    self.kube.custom.delete_namespaced_custom_object,
                    group,
                    version,
                    namespace,
                    plural,
                    job.backend_id,
                    propagation_policy="Background",
                )
        return JobUpdate(state=JobState.CANCELLED, state_reason="cancelled", ended=time.time())

    # -- logs ---------------------------------------------------------------------------------
    def _find_pod(
        self, namespace: str, name: str, rank: int, kind: str = ""
    ) -> dict[str, Any] | None:
        # From the watch cache while it is fresh (no request per look of a log follower).
        cached = self._cache.job_pods(namespace, {name}) if self.watch_cache else None
        if cached is not None:
            pods = cached.get(name, [])
        else:
            if kind == "PyTorchJob":
                # The training operator names worker pods <job>-worker-<index>: one read.
                try:
                    pod = self.kube.call_json(
                        f"read pod {name}-worker-{rank}",
                        self.kube.core.read_namespaced_pod,
                        f"{name}-worker-{rank}",
                        namespace,
                    )
                except NotFound:
                    pod = None
                if pod and job_name_of_pod(pod) == name:
                    return pod  # type: ignore[no-any-return]
            pods = self.kube.list_all(
                f"list the pods of job {name}",
                self.kube.core.list_namespaced_pod,
                namespace,
                label_selector=f"{JOB_ID_LABEL}={name}",
            )
        mine = [p for p in pods if rank_of_pod(p) == rank and job_name_of_pod(p) == name]
        if not mine:
            return None
        return max(
            mine, key=lambda p: timestamp((p.get("metadata") or {}).get("creationTimestamp")) or 0.0
        )

    def dump_stacks(self, job: StoredJob) -> dict[int, RankStack]:
        """Every rank's Python stack, through each worker pod's exec (kubernetes/stacks.py)."""
        from .stacks import dump_stacks

        namespace = self._namespace_of(job)
        kind = self._kind_of(job)[3]
        pods = []
        for worker in range(max(1, int(job.spec.nodes))):
            pod = self._find_pod(namespace, job.backend_id or "", worker, kind) or {}
            name = (pod.get("metadata") or {}).get("name")
            if name:
                pods.append((namespace, str(name), (pod.get("spec") or {}).get("nodeName")))
        return dump_stacks(self.kube, job.id, pods)

    def _job_over(self, job: StoredJob) -> bool:
        group, version, plural, kind = self._kind_of(job)
        try:
            obj = self.kube.call(
                f"read {kind} {job.backend_id}",
                self.kube.custom.get_namespaced_custom_object,
                group,
                version,
                self._namespace_of(job),
                plural,
                job.backend_id,
            )
        except NotFound:
            return True
        update = job_update(obj or {}, [])
        return bool(update.state and update.state.finished)

    def diagnose(self) -> list[DiagnosticCheck]:
        """The kubeconfig context, the API server, the job CRDs, the FSx claim and the watch
        cache (backends/kubernetes/diagnose.py)."""
        from .diagnose import kubernetes_checks

        return kubernetes_checks(self)

    def log_reader(self, job: StoredJob, rank: int) -> LogReader:
        """Rank r's log: with one process per pod, the log of worker pod r; with several
        (torchrun --tee), the lines of local rank r % procs_per_node in pod r // procs_per_node."""
        state = _state(job)
        if state.adopted:  # created elsewhere: the operator's pod labels (queue.py)
            return cluster_queue.adopted_log_reader(self.kube, self.followers, job, rank)
        workers = int(state.workers or job.spec.nodes)
        per_pod = job.spec.procs_per_node if state.split_ranks else 1
        if rank < 0 or rank >= workers * per_pod:
            raise NotFound(f"job {job.id} has ranks 0..{workers * per_pod - 1}, not {rank}")
        if not job.backend_id:
            raise NotFound(f"job {job.id} was never created on the cluster")
        worker = rank // per_pod
        namespace = self._namespace_of(job)
        name = job.backend_id
        kind = self._kind_of(job)[3]

        def make() -> PodLogFollower:
            spool_dir = self.followers.spool_dir(job.id, state.job_dir_local)
            rank_paths = (
                [spool_dir / f"rank-{worker * per_pod + local}.log" for local in range(per_pod)]
                if per_pod > 1
                else []
            )
            return PodLogFollower(
                self.kube,
                namespace=namespace,
                container=CONTAINER,
                spool=spool_dir / f"worker-{worker}.log",
                find_pod=lambda: self._find_pod(namespace, name, worker, kind),
                job_over=lambda: self._job_over(job),
                label=f"worker {worker}",
                rank_paths=rank_paths,
            )

        follower = self.followers.open((job.id, worker), make, finished=job.state.finished)
        path = follower.rank_paths[rank % per_pod] if per_pod > 1 else None
        return SpoolLogReader(follower, self.followers.release, path)

    # -- the cluster's queue (queue.py) ---------------------------------------------------
    def queue(self) -> QueueSnapshot:
        configured = [self.namespace, *self.allowed_namespaces]
        return cluster_queue.list_queue(self.kube, self.reviews, self.identity.name, configured)

    def adopt(self, queue_id: str) -> Adoption:
        return cluster_queue.adopt(self.kube, self.identity.name, queue_id)

    def claim_hint(self, row: QueueJob) -> str | None:
        return cluster_queue.claim_hint(self.identity.name, row)

    def queue_log(self, row: QueueJob, tail: int) -> bytes:
        return cluster_queue.queue_log(self.kube, row, tail)

    def close(self) -> None:
        self.followers.close()
        self._cache.stop()
        self.kube.close()


def _ended(obj: dict[str, Any] | None) -> bool:
    """Whether a job object alone says the job is over (its conditions)."""
    if obj is None:
        return False
    state = job_update(obj, []).state
    return bool(state and state.finished)


def _allocated(pods: list[PodRecord]) -> dict[str, dict[str, float]]:
    """Per node, what its bound, unfinished pods hold (nodes.allocated_by_node, on records)."""
    result: dict[str, dict[str, float]] = {}
    for pod in pods:
        if pod.holds and pod.node and pod.phase not in ("Succeeded", "Failed"):
            slot = result.setdefault(pod.node, {})
            for resource, value in pod.holds:
                slot[resource] = slot.get(resource, 0.0) + value
    return result


def _state(job: StoredJob) -> KubernetesState:
    return KubernetesState.load(job.data)


def _with_operator_verdict(
    update: JobUpdate, obj: dict[str, Any], previous: OperatorVerdict | None
) -> None:
    """HyperPod's own verdict (operator_verdict.py), kept with the job when it changed."""
    verdict = operator_verdict(obj.get("status") or {}, previous)
    if verdict is None or verdict == previous:
        return
    update.data = (update.data or KubernetesState()).changed(operator_verdict=verdict)
