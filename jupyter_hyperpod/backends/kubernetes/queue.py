"""The Kubernetes queue: every HyperPodPyTorchJob and PyTorchJob in the namespaces this user may
list, and adopting a job of mine created with `kubectl apply` (a manifest we did not render).

What the user may do is asked, not assumed: a SelfSubjectAccessReview (authorization.k8s.io/v1,
the API `kubectl auth can-i` calls) for `list` on each kind, cluster-wide first, then per
namespace; for `get pods/log` before a row says its logs are readable. Kubernetes records no
creator on objects (EKS access entries map an IAM role to an RBAC username, managedFields names
the client program, not a person), so a job is "mine" when it carries the
`hyperpod.jupyter.org/user` label with my name (`Identity.name`, the label value of Studio's user
profile). This extension's jobs do; a job applied with kubectl is claimed by adding that label (in
its manifest, or `kubectl label <kind> <name> hyperpod.jupyter.org/user=<me>`). An unlabelled job
is nobody's: shown, not mine, even in my team's namespace (`hyperpod-ns-<team>`: a team's, not a
person's), where the namespace filter finds it.

Pods of a job are found by the operators' own labels: Kubeflow's training operator labels them
`training.kubeflow.org/job-name` and `training.kubeflow.org/replica-index`
(pkg/controller.v1/common/pod.go, `GenLabels`), the HyperPod training operator `HPJob=<name>`.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from typing import Any

from ...core.backend import JobUpdate, LogReader, StoredJob
from ...core.errors import Forbidden, InvalidRequest, NotFound
from ...core.models import JOB_NAME_PATTERN, JobSpec, JobState
from ...core.queue import Adoption, QueueJob, QueueSnapshot
from .client import KubeClient
from .jobs import job_name_of_pod, job_update, latest_condition, rank_of_pod, timestamp
from .logs import FollowerPool, PodLogFollower, SpoolLogReader
from .manifest import (
    CONTAINER,
    HPJOB_LABEL,
    HYPERPOD,
    JOB_KINDS,
    KUBEFLOW,
    KUBEFLOW_JOB_LABEL,
    label_value,
)
from .state import KubernetesState
from .trainjob import (
    JOBSET_LABEL,
    REPLICATED_JOB_LABEL,
    TRAINER,
    TRAINER_REPLICATED_JOB,
    USER_KINDS,
    trainer_progress,
)

# The labels manifest.py puts on our jobs (kept here too: adopted jobs carry them by hand).
USER_LABEL = "hyperpod.jupyter.org/user"
# Kueue (HyperPod task governance): the LocalQueue and WorkloadPriorityClass of a workload.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"

ACCESS_TTL_SECONDS = 60.0
GPU_RESOURCES = ("nvidia.com/gpu", "aws.amazon.com/neurondevice")
SOURCE = "Kubernetes API (HyperPodPyTorchJob, PyTorchJob)"


class AccessReviews:
    """SelfSubjectAccessReview answers, cached a minute (permissions change rarely)."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self._cache: dict[tuple[str, ...], tuple[float, bool]] = {}
        self._lock = threading.Lock()

    def allowed(
        self,
        verb: str,
        group: str,
        resource: str,
        namespace: str = "",
        subresource: str = "",
    ) -> bool:
        key = (verb, group, resource, namespace, subresource)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit and now - hit[0] < ACCESS_TTL_SECONDS:
                return hit[1]
        from kubernetes import client

        kube = self.kube
        attributes = {"verb": verb, "group": group, "resource": resource}
        if namespace:
            attributes["namespace"] = namespace
        if subresource:
            attributes["subresource"] = subresource
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        try:
            answer = kube.call_json(
                f"review access to {verb} {resource}",
                client.AuthorizationV1Api(kube.api_client).create_self_subject_access_review,
                body,
            )
            allowed = bool((answer.get("status") or {}).get("allowed"))
        except Forbidden:
            allowed = False
        with self._lock:
            self._cache[key] = (now, allowed)
        return allowed


def candidate_namespaces(
    kube: KubeClient, reviews: AccessReviews, configured: list[str]
) -> list[str]:
    """The configured namespaces, plus every namespace when this user may list them."""
    names = list(dict.fromkeys(configured))
    if reviews.allowed("list", "", "namespaces"):
        with contextlib.suppress(Forbidden):
            found = kube.list_all("list namespaces", kube.core.list_namespace)
            names += [(n.get("metadata") or {}).get("name", "") for n in found]
    return [name for name in dict.fromkeys(names) if name]


def _replicas(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") or {}
    if obj.get("kind") == HYPERPOD[3] or "replicaSpecs" in spec:
        return [r for r in spec.get("replicaSpecs") or [] if isinstance(r, dict)]
    return [r for r in (spec.get("pytorchReplicaSpecs") or {}).values() if isinstance(r, dict)]


def _gpus_of(template: dict[str, Any]) -> int:
    total = 0
    for container in (template.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        wanted = resources.get("limits") or resources.get("requests") or {}
        for name in GPU_RESOURCES:
            with contextlib.suppress(TypeError, ValueError):
                total += int(wanted.get(name) or 0)
    return total


def shape(obj: dict[str, Any]) -> tuple[int, int]:
    """(pods, GPUs) the job asks for: replicas x the GPUs of each replica's pod template."""
    pods = gpus = 0
    for replica in _replicas(obj):
        count = int(replica.get("replicas") or 1)
        pods += count
        gpus += count * _gpus_of(replica.get("template") or {})
    return pods, gpus


def row_from_object(obj: dict[str, Any], kind: str, user: str, logs_ok: bool) -> QueueJob:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    namespace = meta.get("namespace") or ""
    name = meta.get("name") or ""
    update = job_update(obj, [])
    state = update.state or JobState.PENDING
    latest = latest_condition((obj.get("status") or {}).get("conditions") or [])
    owner = labels.get(USER_LABEL, "")
    pods, gpus = shape(obj)
    reason = update.state_reason if state is JobState.PENDING else None
    if state is JobState.PENDING and not reason:
        reason = "waiting for the operator" if not latest else None
    return QueueJob(
        id=f"{namespace}/{kind}/{name}",
        name=name,
        user=owner,
        state=state,
        native_state=(latest or {}).get("type") or "Created",
        reason=reason,
        nodes=pods,
        gpus=gpus,
        partition=labels.get(QUEUE_LABEL) or namespace,
        namespace=namespace,
        kind=kind,
        priority_class=labels.get(PRIORITY_LABEL),
        submitted=timestamp(meta.get("creationTimestamp")),
        started=update.started if state is not JobState.PENDING else None,
        mine=bool(owner) and owner == label_value(user),
        logs_readable=logs_ok,
        logs_reason=None if logs_ok else f"not allowed to read pod logs in namespace {namespace}",
    )


def list_queue(
    kube: KubeClient, reviews: AccessReviews, user: str, configured: list[str]
) -> QueueSnapshot:
    """Every job of both kinds this user may list: cluster-wide where allowed, else in each of
    the `configured` namespaces (and every namespace, when those may be listed) that allows it."""
    rows: list[QueueJob] = []
    namespaces: list[str] | None = None
    for group, version, plural, kind in (HYPERPOD, KUBEFLOW):
        if reviews.allowed("list", group, plural):
            scopes: list[str | None] = [None]
        else:
            if namespaces is None:
                namespaces = candidate_namespaces(kube, reviews, configured)
            scopes = [ns for ns in namespaces if reviews.allowed("list", group, plural, ns)]
        for scope in scopes:
            try:
                if scope is None:
                    items = kube.list_all(
                        f"list {kind}s in all namespaces",
                        kube.custom.list_cluster_custom_object,
                        group,
                        version,
                        plural,
                    )
                else:
                    items = kube.list_all(
                        f"list {kind}s in namespace {scope}",
                        kube.custom.list_namespaced_custom_object,
                        group,
                        version,
                        scope,
                        plural,
                    )
            except NotFound:
                break  # the cluster does not serve this kind (no operator)
            for obj in items:
                namespace = (obj.get("metadata") or {}).get("namespace") or scope or ""
                logs_ok = reviews.allowed("get", "", "pods", namespace, "log")
                rows.append(row_from_object(obj, kind, user, logs_ok))
    return QueueSnapshot(jobs=rows, source=SOURCE)


def parse_id(queue_id: str) -> tuple[str, tuple[str, str, str, str], str]:
    parts = queue_id.split("/")
    if len(parts) != 3 or parts[1] not in JOB_KINDS:
        raise InvalidRequest(
            f"'{queue_id}' is not a Kubernetes queue id (<namespace>/<kind>/<name>)", field="id"
        )
    return parts[0], JOB_KINDS[parts[1]], parts[2]


def _read(kube: KubeClient, namespace: str, kind: tuple[str, ...], name: str) -> Any:
    group, version, plural, title = kind
    return kube.call_json(
        f"read {title} {name} in namespace {namespace}",
        kube.custom.get_namespaced_custom_object,
        group,
        version,
        namespace,
        plural,
        name,
    )


def claim_hint(user: str, row: QueueJob) -> str | None:
    """An unlabelled job is nobody's: the command that claims it (the label added by hand)."""
    if not row.namespace or not row.kind or row.kind not in JOB_KINDS:
        return None
    plural = JOB_KINDS[row.kind][2]
    return (
        f"if it is yours, claim it: kubectl label -n {row.namespace} {plural} {row.name} "
        f"{USER_LABEL}={label_value(user)}"
    )


def adopt(kube: KubeClient, user: str, queue_id: str) -> Adoption:
    """One of my jobs (labelled with my name) as a job of this server."""
    namespace, kind, name = parse_id(queue_id)
    try:
        obj = _read(kube, namespace, kind, name)
    except NotFound:
        raise NotFound(f"no {kind[3]} {name} in namespace {namespace}", field="id") from None
    labels = (obj.get("metadata") or {}).get("labels") or {}
    owner = labels.get(USER_LABEL, "")
    mine = label_value(user)
    if not owner or owner != mine:
        raise Forbidden(
            f"{kind[3]} {name} is not labelled {USER_LABEL}={mine}: only your own jobs can be "
            f"opened here (claim one applied with kubectl: kubectl label -n {namespace} "
            f"{kind[2]} {name} {USER_LABEL}={mine})",
            field="id",
        )
    replicas = _replicas(obj)
    template = (replicas[0].get("template") or {}) if replicas else {}
    containers = (template.get("spec") or {}).get("containers") or [{}]
    container = next((c for c in containers if c.get("name") == CONTAINER), containers[0])
    command = [*(container.get("command") or []), *(container.get("args") or [])]
    pods, gpus = shape(obj)
    # The same name for the same object in every process (hash() is salted per process).
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    job_name = name if re.match(JOB_NAME_PATTERN, name) else f"k8s-{digest}"
    spec = JobSpec(
        name=job_name,
        command=command or [f"({kind[3]} {name})"],
        nodes=max(1, pods),
        gpus_per_node=gpus // max(1, pods),
        image=container.get("image") or None,
        kind=kind[3],
        namespace=namespace,
        queue=labels.get(QUEUE_LABEL) or None,
        params={"adopted": queue_id},
    )
    update = job_update(obj, [])
    state = update.state or JobState.PENDING
    created = timestamp((obj.get("metadata") or {}).get("creationTimestamp")) or time.time()
    data = KubernetesState(
        namespace=namespace,
        kind=kind[3],
        group=kind[0],
        version=kind[1],
        plural=kind[2],
        workers=max(1, pods),
        split_ranks=False,
        adopted=True,
    )
    return Adoption(
        backend_id=name,
        spec=spec,
        data=data,
        events=[f"adopted {kind[3]} {namespace}/{name} (created outside this server)"],
        state=state,
        created=created,
        started=update.started,
    )


def _pod_selector(kind: str, name: str) -> str:
    if kind == TRAINER[3]:  # the trainer's pods of the JobSet the TrainJob made (trainjob.py)
        return f"{JOBSET_LABEL}={name},{REPLICATED_JOB_LABEL}={TRAINER_REPLICATED_JOB}"
    return f"{HPJOB_LABEL}={name}" if kind == HYPERPOD[3] else f"{KUBEFLOW_JOB_LABEL}={name}"


def _pods(kube: KubeClient, job: StoredJob) -> list[dict[str, Any]]:
    state = KubernetesState.load(job.data)
    namespace, kind = str(state.namespace), str(state.kind)
    pods = kube.list_all(
        f"list the pods of {kind} {job.backend_id}",
        kube.core.list_namespaced_pod,
        namespace,
        label_selector=_pod_selector(kind, job.backend_id or ""),
    )
    return [
        p
        for p in pods
        if job_name_of_pod(p) == job.backend_id or _operator_job(p) == job.backend_id
    ]


def _operator_job(pod: dict[str, Any]) -> str | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(KUBEFLOW_JOB_LABEL) or labels.get(HPJOB_LABEL) or labels.get(JOBSET_LABEL)


def refresh_adopted(kube: KubeClient, jobs: list[StoredJob]) -> dict[str, JobUpdate]:
    """Status of adopted jobs: their object and the pods their operator labelled."""
    updates: dict[str, JobUpdate] = {}
    for job in jobs:
        state = KubernetesState.load(job.data)
        kind = USER_KINDS[state.kind or KUBEFLOW[3]]
        try:
            obj = _read(kube, str(state.namespace), kind, job.backend_id or "")
        except NotFound:
            updates[job.id] = JobUpdate(
                state=JobState.CANCELLED,
                state_reason="the job object was deleted from the cluster",
                ended=time.time(),
            )
            continue
        update = job_update(obj, _pods(kube, job), faults=state.faults)
        if kind == TRAINER:
            _with_trainer_progress(update, obj, state, job.started)
        updates[job.id] = update
    return updates


def _with_trainer_progress(
    update: JobUpdate, obj: dict[str, Any], state: KubernetesState, started: float | None
) -> None:
    """A TrainJob's trainerStatus (trainjob.py), kept with the job when it changed."""
    found = trainer_progress(obj, started)
    progress = found.model_dump(mode="json", exclude={"elapsed_seconds"}) if found else None
    if progress == state.trainer_progress:
        return
    update.data = (update.data or KubernetesState()).changed(trainer_progress=progress)


def adopted_log_reader(
    kube: KubeClient, followers: FollowerPool, job: StoredJob, rank: int
) -> LogReader:
    """Rank r's log: the pod of replica index r (one process per pod), followed like ours."""
    state = KubernetesState.load(job.data)
    workers = state.workers or job.spec.nodes
    if not 0 <= rank < workers:
        raise NotFound(f"job {job.id} has ranks 0..{workers - 1}, not {rank}")
    namespace = str(state.namespace)

    def find_pod() -> dict[str, Any] | None:
        mine = [p for p in _pods(kube, job) if rank_of_pod(p) == rank]
        if not mine:
            return None
        return max(
            mine, key=lambda p: timestamp((p.get("metadata") or {}).get("creationTimestamp")) or 0
        )

    def job_over() -> bool:
        update = refresh_adopted(kube, [job]).get(job.id)
        return bool(update and update.state and update.state.finished)

    def make() -> PodLogFollower:
        return PodLogFollower(
            kube,
            namespace=namespace,
            container=CONTAINER,
            spool=followers.spool_dir(job.id, state.job_dir_local) / f"worker-{rank}.log",
            find_pod=find_pod,
            job_over=job_over,
            label=f"adopted {job.backend_id} worker {rank}",
        )

    follower = followers.open((job.id, rank), make, finished=job.state.finished)
    return SpoolLogReader(follower, followers.release, None)


def queue_log(kube: KubeClient, row: QueueJob, tail: int) -> bytes:
    """The last lines of replica 0's pod, read once (a read-only view of someone's job)."""
    namespace, kind, name = parse_id(row.id)
    pods = kube.list_all(
        f"list the pods of {kind[3]} {name}",
        kube.core.list_namespaced_pod,
        namespace,
        label_selector=_pod_selector(kind[3], name),
    )
    first = [p for p in pods if rank_of_pod(p) in (0, None)]
    if not first:
        return b""
    pod = (first[0].get("metadata") or {}).get("name", "")
    response = kube.call(
        f"read the log of pod {pod}",
        kube.core.read_namespaced_pod_log,
        pod,
        namespace,
        container=CONTAINER,
        tail_lines=tail,
        _preload_content=False,
    )
    try:
        return bytes(response.data)
    finally:
        response.release_conn()
