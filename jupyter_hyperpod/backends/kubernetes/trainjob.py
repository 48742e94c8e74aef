"""A user's own Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1), where the cluster
serves it: checked with Kubeflow's maintained models (the kubeflow-trainer-api package), policed
like the other manifests, marked as ours, tracked through the pods its JobSet makes.

Kubeflow Trainer (github.com/kubeflow/trainer, pkg/apis/trainer/v1alpha1/trainjob_types.go): the
TrainJob names a runtime (`spec.runtimeRef`, a ClusterTrainingRuntime by default) and overrides
its trainer (`spec.trainer`: image, command, args, env, numNodes, resourcesPerNode). The
controller makes one JobSet of the same name; its pods carry `jobset.sigs.k8s.io/jobset-name` and
the trainer's are the `node` replicated job, one pod per node with its index in
`batch.kubernetes.io/job-completion-index`. The status has conditions (`Suspended`, `Complete`,
`Failed`) and `trainerStatus` (progressPercentage, estimatedRemainingSeconds, metrics), which
the runtime's trainer reports.

The pod specs a TrainJob runs come from the runtime (the admin's) and from `spec.runtimePatches`
(the user's): those patches are refused here (403) because their pod specs are not checked
against the admin's policy yet: fail closed.
"""

from __future__ import annotations

import re
import time
from typing import Any

from ...core.byo import FileContext, PreparedFile
from ...core.errors import BackendUnavailable, InvalidRequest
from ...core.models import JobProgress
from .manifest import (
    JOB_ID_LABEL,
    JOB_KINDS,
    MANAGED_BY,
    MANAGER,
    QUEUE_LABEL,
    USER_LABEL,
    label_value,
)
from .safe_yaml import line_of, load_one
from .user_manifest import (
    _ABSOLUTE,
    SHM,
    UserManifestPolicy,
    _allowed_namespace,
    _forbid,
    _invalid,
    _paths,
    _required_name,
    _set,
    prepare_manifest,
    to_yaml,
)

TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
USER_KINDS = {**JOB_KINDS, TRAINER[3]: TRAINER}
"""The kinds a user's file may be: ours, and a TrainJob where the cluster serves it."""
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
TRAINER_REPLICATED_JOB = "node"
TOP_LEVEL = {"apiVersion", "kind", "metadata", "spec"}
# The TrainJob webhook (pkg/webhooks/trainjob_webhook.go) requires a DNS-1035 label: the JobSet,
# its Jobs and headless Service are named after it.
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
NOT_SERVED = (
    "this cluster does not serve {group}/{version} (Kubeflow Trainer v2 is not installed): "
    "apply the job as a PyTorchJob (kubeflow.org/v1) or a HyperPodPyTorchJob "
    "(sagemaker.amazonaws.com/v1), or ask the admin to install Kubeflow Trainer"
)


def prepare_user_manifest(ctx: FileContext, policy: UserManifestPolicy) -> PreparedFile:
    """A user's manifest as it will be sent: a TrainJob here (where the cluster serves it), a
    PyTorchJob or HyperPodPyTorchJob by user_manifest.py."""
    obj, lines = load_one(ctx.text)
    if obj.get("kind") != TRAINER[3]:
        return prepare_manifest(ctx, policy, (obj, lines))
    served = policy.serves_trainjob()
    if served is None:
        raise BackendUnavailable(
            "cannot ask the cluster now whether it serves trainer.kubeflow.org/v1alpha1 "
            "(Kubeflow Trainer's TrainJob): try again in a moment"
        )
    if not served:
        raise not_served(lines)
    return prepare_trainjob(obj, lines, ctx, policy)


def not_served(lines: dict[str, int]) -> InvalidRequest:
    group, version = TRAINER[0], TRAINER[1]
    return InvalidRequest(
        f"{line_of(lines, 'apiVersion')}apiVersion: "
        + NOT_SERVED.format(group=group, version=version),
        field="apiVersion",
    )


def _check_model(obj: dict[str, Any], lines: dict[str, int]) -> None:
    """The TrainJob against Kubeflow's model; every field must come back (the model drops the
    ones it does not know: a typo, or another version's)."""
    from pydantic import ValidationError

    try:
        from kubeflow_trainer_api.models.trainer_v1alpha1_train_job import (
            TrainerV1alpha1TrainJob,
        )
    except ImportError:  # fail closed: no model, no TrainJob
        raise InvalidRequest(
            "a TrainJob is checked with Kubeflow's models before it is sent: the server needs "
            "pip install kubeflow-trainer-api (in jupyter-hyperpod[kubernetes])",
            field="kind",
        ) from None

    try:
        loaded = TrainerV1alpha1TrainJob.from_dict(obj)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise _invalid(
            "spec", lines, f"not a valid TrainJob: {error.title}.{where}: {first.get('msg')}"
        ) from None
    back = loaded.to_dict() if loaded is not None else {}
    unknown = sorted(_paths(obj, "") - _paths(back, ""))
    if unknown:
        raise _invalid(
            unknown[0], lines, "TrainJob (trainer.kubeflow.org/v1alpha1) has no such field"
        )


def prepare_trainjob(
    obj: dict[str, Any], lines: dict[str, int], ctx: FileContext, policy: UserManifestPolicy
) -> PreparedFile:
    original = to_yaml(obj)
    if obj.get("apiVersion") != f"{TRAINER[0]}/{TRAINER[1]}":
        raise _invalid(
            "apiVersion",
            lines,
            f"a TrainJob is apiVersion {TRAINER[0]}/{TRAINER[1]}, not {obj.get('apiVersion')}",
        )
    extra = sorted(set(obj) - TOP_LEVEL)
    if extra:
        what = "is written by the controller" if extra == ["status"] else "is not part of a job"
        raise _invalid(extra[0], lines, f"{', '.join(extra)} {what}: remove it")
    if not isinstance(obj.get("spec"), dict):
        raise _invalid("spec", lines, "the job needs a spec with runtimeRef")
    _check_model(obj, lines)
    meta = obj.setdefault("metadata", {})
    name = _required_name(meta, lines)
    if len(name) > 63 or not _DNS1035.match(name):
        raise _invalid(
            "metadata.name",
            lines,
            f"'{name}' is not a DNS-1035 label (lower-case letters, digits and '-', starting "
            "with a letter, at most 63): the TrainJob's JobSet and Service are named after it",
        )
    namespace = _allowed_namespace(meta, lines, policy)
    spec = obj["spec"]
    if spec.get("runtimePatches"):
        raise _forbid(
            "TrainJob runtime patches",
            "spec.runtimePatches",
            lines,
            "runtime patches change the runtime's pods (volumes, security contexts, service "
            "accounts), which are not checked against the admin's policy here: remove them and "
            "use a runtime the admin provides",
        )
    if spec.get("managedBy") not in (None, "", "trainer.kubeflow.org/trainjob-controller"):
        raise _forbid(
            "TrainJob controller",
            "spec.managedBy",
            lines,
            f"'{spec['managedBy']}' hands the job to another controller: leave managedBy out",
        )
    trainer = spec.get("trainer") or {}
    _check_trainer_paths(trainer, lines, policy, ctx)
    changes: list[Any] = []
    _set(meta, "namespace", namespace, "metadata.namespace", "the default namespace", changes)
    labels = meta.setdefault("labels", {})
    ours = {
        MANAGED_BY: MANAGER,
        JOB_ID_LABEL: ctx.job_id,
        **({USER_LABEL: label_value(ctx.user)} if label_value(ctx.user) else {}),
    }
    for key, value in ours.items():
        _set(
            labels,
            key,
            value,
            f"metadata.labels.{key}",
            "tracked as your job (job id, owner)",
            changes,
        )
    resources = trainer.get("resourcesPerNode") or {}
    gpus = (resources.get("limits") or resources.get("requests") or {}).get("nvidia.com/gpu", 0)
    nodes = trainer.get("numNodes")
    return PreparedFile(
        format="manifest",
        language="yaml",
        original=original,
        text=to_yaml(obj),
        changes=changes,
        problems=[],
        name=name,
        nodes=nodes if isinstance(nodes, int) and nodes > 0 else 1,
        gpus_per_node=int(gpus) if str(gpus).isdigit() else 0,
        command=[*(trainer.get("command") or []), *(trainer.get("args") or [])],
        image=trainer.get("image"),
        kind=TRAINER[3],
        namespace=namespace,
        queue=labels.get(QUEUE_LABEL),
        warnings=[]
        if trainer.get("numNodes")
        else ["spec.trainer.numNodes is not set: the runtime's node count is used"],
        payload=obj,
    )


def _check_trainer_paths(
    trainer: dict[str, Any], lines: dict[str, int], policy: UserManifestPolicy, ctx: FileContext
) -> None:
    """Every absolute path the trainer names on the shared file system (below `fs_mount`, as
    the runtime's pods see the claim) goes through the one partition check."""
    root = policy.fs_mount.rstrip("/")
    texts: list[tuple[str, str]] = []
    for key in ("command", "args"):
        texts += [
            (f"spec.trainer.{key}[{i}]", str(p)) for i, p in enumerate(trainer.get(key) or [])
        ]
    for index, item in enumerate(trainer.get("env") or []):
        if isinstance(item, dict) and isinstance(item.get("value"), str):
            texts.append((f"spec.trainer.env[{index}].value", item["value"]))
    for where, text in texts:
        for match in _ABSOLUTE.finditer(text):
            path = match.group(1)
            if path == SHM or path.startswith(SHM + "/"):
                continue
            if root and (path == root or path.startswith(root + "/")):
                ctx.check_path(path, where)


def trainer_progress(obj: dict[str, Any], started: float | None = None) -> JobProgress | None:
    """What the runtime's trainer reported (status.trainerStatus: progressPercentage,
    estimatedRemainingSeconds, metrics), as a JobProgress; None before it reports a percentage."""
    status = (obj.get("status") or {}).get("trainerStatus")
    if not isinstance(status, dict):
        return None
    percent = status.get("progressPercentage")
    if not isinstance(percent, int) or isinstance(percent, bool) or not 0 <= percent <= 100:
        return None
    metrics = {
        str(m.get("name")): m.get("value")
        for m in status.get("metrics") or []
        if isinstance(m, dict) and m.get("name")
    }
    loss = _number(metrics.get("loss") or metrics.get("train_loss"))
    remaining = status.get("estimatedRemainingSeconds")
    return JobProgress(
        step=percent,
        total=100,
        fraction=percent / 100,
        elapsed_seconds=time.time() - started if started else None,
        eta_seconds=float(remaining) if isinstance(remaining, int) and remaining >= 0 else None,
        loss=loss,
        source="trainerStatus",
    )


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def trainer_pod(pod: dict[str, Any]) -> bool:
    """A pod of the TrainJob's trainer (not an initializer's)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(REPLICATED_JOB_LABEL) == TRAINER_REPLICATED_JOB


__all__ = [
    "JOBSET_LABEL",
    "REPLICATED_JOB_LABEL",
    "TRAINER",
    "TRAINER_REPLICATED_JOB",
    "USER_KINDS",
    "not_served",
    "prepare_trainjob",
    "trainer_pod",
    "trainer_progress",
]
