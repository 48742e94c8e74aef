"""A `Launch` as a Kubeflow `PyTorchJob` or a HyperPod `HyperPodPyTorchJob`, in the shape of the
seed's `pod-finetuning.yaml`, plus the checks that keep a job spec inside what the admin allows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ...core.errors import Forbidden, InvalidRequest
from ...core.launch import program_argv, torchrun_argv, uses_torchrun
from ...core.models import JobSpec
from ..base import Launch
from .nodes import DEEP_HEALTH_LABEL, EFA_RESOURCE, HEALTH_LABEL

KUBEFLOW = ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
HYPERPOD = ("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs", "HyperPodPyTorchJob")
JOB_KINDS = {KUBEFLOW[3]: KUBEFLOW, HYPERPOD[3]: HYPERPOD}

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "jupyter-hyperpod"
JOB_ID_LABEL = "hyperpod.jupyter.org/job-id"
USER_LABEL = "hyperpod.jupyter.org/user"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUBEFLOW_JOB_LABEL = "training.kubeflow.org/job-name"
KUBEFLOW_INDEX_LABEL = "training.kubeflow.org/replica-index"
HPJOB_LABEL = "HPJob"
AUTO_RESUME_ANNOTATION = "sagemaker.amazonaws.com/enable-job-auto-resume"
MAX_RETRY_ANNOTATION = "sagemaker.amazonaws.com/job-max-retry-count"
CONTAINER = "pytorch"

NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$")
_DOLLAR = re.compile(r"\$(?=[$(])")
MAX_OBJECT_NAME = 59  # leaves room for "-worker-NNN" within a 63-character pod hostname


@dataclass
class ManifestOptions:
    namespace: str
    kind: str
    image: str
    pvc_name: str
    fs_mount: str
    service_account: str = ""
    shm_size: str = ""
    image_pull_policy: str = "Always"
    python: str = "python3"
    allowed_namespaces: list[str] = field(default_factory=list)
    extra_labels: dict[str, str] = field(default_factory=dict)
    run_as_partition_owner: bool = False
    """Pods run as the owner of the job's partition (securityContext), see admin/owner.py."""


def k8s_escape(text: str) -> str:
    """Kubernetes expands `$(VAR)` in command, args and env values and turns `$$` into `$`: double
    each `$` that precedes `$` or `(`, so that user text arrives literally."""
    return _DOLLAR.sub("$$", text)


def label_value(text: str) -> str:
    """Any text as a valid label value (<= 63 chars, alphanumerics at both ends)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63].strip("-_.")
    return cleaned


def validate_name(name: str, what: str = "name") -> None:
    if not NAME_RE.match(name) or len(name) > MAX_OBJECT_NAME:
        raise InvalidRequest(
            f"'{name}' is not a valid Kubernetes object name: lowercase letters, digits and '-', "
            f"starting and ending with a letter or digit, at most {MAX_OBJECT_NAME} characters",
            field=what,
        )


def job_kind(requested: str | None, default: str) -> tuple[str, str, str, str]:
    kind = requested or default
    try:
        return JOB_KINDS[kind]
    except KeyError:
        raise InvalidRequest(
            f"unknown job kind '{kind}' (use {' or '.join(JOB_KINDS)})", field="kind"
        ) from None


def resolve_namespace(requested: str | None, options: ManifestOptions) -> str:
    namespace = requested or options.namespace
    allowed = options.allowed_namespaces or [options.namespace]
    if namespace not in allowed:
        raise Forbidden(
            f"namespace '{namespace}' is not allowed (allowed: {', '.join(allowed)})",
            field="namespace",
        )
    return namespace


def split_ranks(spec: JobSpec) -> bool:
    """Several ranks share a pod's log: torchrun tags their lines so that we can split them."""
    return uses_torchrun(spec, multi_node_cluster=True) and spec.procs_per_node > 1


def container_command(launch: Launch, python: str) -> list[str]:
    spec = launch.spec
    program = [k8s_escape(part) for part in launch.command]
    if uses_torchrun(spec, multi_node_cluster=True):
        # Multi-node: the training operator sets MASTER_ADDR/MASTER_PORT on every worker; c10d
        # rendezvous then assigns node ranks itself. One node: torchrun's local static rendezvous.
        endpoint = "$(MASTER_ADDR):$(MASTER_PORT)" if spec.nodes > 1 else None
        argv = torchrun_argv(
            program,
            nnodes=spec.nodes,
            nproc_per_node=spec.procs_per_node,
            rdzv_endpoint=endpoint,
            max_restarts=0,
        )
        if split_ranks(spec):
            # Each local rank's output, prefixed "[default<local_rank>]:", on the pod log.
            argv.insert(3, "--tee=3")
        return argv
    if spec.procs_per_node > 1:
        raise InvalidRequest(
            "the plain launcher runs one process per pod on Kubernetes: use torchrun for "
            "several processes per node",
            field="procs_per_node",
        )
    return program_argv(program, python)


def build_manifest(launch: Launch, options: ManifestOptions) -> dict[str, Any]:
    spec = launch.spec
    validate_name(launch.job_id)
    group, version, _plural, kind = job_kind(spec.kind, options.kind)
    namespace = resolve_namespace(spec.namespace, options)
    image = spec.image or options.image
    if not image:
        raise InvalidRequest(
            "this job needs a container image (no default image is configured)", field="image"
        )
    if not IMAGE_RE.match(image):
        raise InvalidRequest(f"'{image}' is not a container image reference", field="image")

    labels = {
        MANAGED_BY: MANAGER,
        JOB_ID_LABEL: launch.job_id,
        **({USER_LABEL: label_value(launch.user)} if label_value(launch.user) else {}),
        **options.extra_labels,
    }
    if spec.queue:
        if not LABEL_VALUE_RE.match(spec.queue) or len(spec.queue) > 63:
            raise InvalidRequest(f"'{spec.queue}' is not a valid queue name", field="queue")
        labels[QUEUE_LABEL] = spec.queue

    resources: dict[str, Any] = {}
    if spec.gpus_per_node:
        resources["nvidia.com/gpu"] = spec.gpus_per_node
    if spec.efa_per_node:
        resources[EFA_RESOURCE] = spec.efa_per_node

    shm_volume: dict[str, Any] = (
        {"name": "shmem", "emptyDir": {"medium": "Memory", "sizeLimit": options.shm_size}}
        if options.shm_size
        else {"name": "shmem", "hostPath": {"path": "/dev/shm"}}
    )
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": options.image_pull_policy,
        "command": container_command(launch, options.python),
        "workingDir": launch.workdir,
        "env": [{"name": key, "value": k8s_escape(value)} for key, value in launch.env.items()],
        "volumeMounts": [
            {"name": "shmem", "mountPath": "/dev/shm"},
            {"name": "fsx-volume", "mountPath": options.fs_mount},
        ],
    }
    if resources:
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    if not container["env"]:
        del container["env"]

    pod_spec: dict[str, Any] = {}
    if options.service_account:
        pod_spec["serviceAccountName"] = options.service_account
    node_selector: dict[str, str] = {}
    if spec.auto_resume or spec.healthy_nodes_only:
        node_selector[HEALTH_LABEL] = "Schedulable"
    if spec.healthy_nodes_only:
        node_selector[DEEP_HEALTH_LABEL] = "Passed"
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    if options.run_as_partition_owner:
        from ...admin.owner import pod_security_context

        security = pod_security_context(launch.job_dir_local)
        if security:
            pod_spec["securityContext"] = security
    pod_spec["containers"] = [container]
    pod_spec["volumes"] = [
        shm_volume,
        {"name": "fsx-volume", "persistentVolumeClaim": {"claimName": options.pvc_name}},
    ]
    template = {"metadata": {"labels": dict(labels)}, "spec": pod_spec}
    restart_policy = "OnFailure" if spec.auto_resume else "Never"

    metadata: dict[str, Any] = {"name": launch.job_id, "namespace": namespace, "labels": labels}
    run_policy: dict[str, Any] = {}
    if spec.time_limit_minutes:
        run_policy["activeDeadlineSeconds"] = spec.time_limit_minutes * 60
    if kind == KUBEFLOW[3]:
        if spec.auto_resume:
            metadata["annotations"] = {
                AUTO_RESUME_ANNOTATION: "true",
                MAX_RETRY_ANNOTATION: str(spec.max_retries or 3),
            }
        run_policy["backoffLimit"] = spec.max_retries
        job_spec: dict[str, Any] = {
            "nprocPerNode": str(spec.procs_per_node),
            "runPolicy": run_policy,
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": spec.nodes,
                    "restartPolicy": restart_policy,
                    "template": template,
                }
            },
        }
    else:
        run_policy["jobMaxRetryCount"] = (
            spec.max_retries if (spec.auto_resume or spec.max_retries) else 0
        )
        run_policy["cleanPodPolicy"] = "None"
        template["spec"]["restartPolicy"] = restart_policy
        job_spec = {
            "nprocPerNode": str(spec.procs_per_node),
            "runPolicy": run_policy,
            "replicaSpecs": [{"name": "pods", "replicas": spec.nodes, "template": template}],
        }
    manifest = {
        "apiVersion": f"{group}/{version}",
        "kind": kind,
        "metadata": metadata,
        "spec": job_spec,
    }
    check_manifest(manifest, options)
    return manifest


def pod_templates(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    spec = manifest.get("spec") or {}
    if "pytorchReplicaSpecs" in spec:
        return [
            replica.get("template") or {}
            for replica in (spec["pytorchReplicaSpecs"] or {}).values()
        ]
    return [replica.get("template") or {} for replica in spec.get("replicaSpecs") or []]


def check_manifest(manifest: dict[str, Any], options: ManifestOptions) -> None:
    """Defence in depth on the final object: whatever built it, it may not escape the sandbox the
    admin configured (namespace, host paths, privileges)."""
    namespace = (manifest.get("metadata") or {}).get("namespace")
    allowed = options.allowed_namespaces or [options.namespace]
    if namespace not in allowed:
        raise Forbidden(
            f"namespace '{namespace}' is not allowed (allowed: {', '.join(allowed)})",
            field="namespace",
        )
    for template in pod_templates(manifest):
        pod = template.get("spec") or {}
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.get(key):
                raise Forbidden(f"jobs cannot use {key}", field="spec")
        for volume in pod.get("volumes") or []:
            host_path = (volume.get("hostPath") or {}).get("path")
            if host_path is not None and not (
                volume.get("name") == "shmem" and host_path == "/dev/shm"
            ):
                raise Forbidden(f"jobs cannot mount host paths ({host_path})", field="spec")
        for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
            context = container.get("securityContext") or {}
            if context.get("privileged") or context.get("allowPrivilegeEscalation"):
                raise Forbidden("jobs cannot run privileged containers", field="spec")
            added = ((context.get("capabilities") or {}).get("add")) or []
            if added:
                raise Forbidden(f"jobs cannot add capabilities ({', '.join(added)})", field="spec")


def to_yaml(manifest: dict[str, Any]) -> str:
    return yaml.safe_dump(
        manifest, sort_keys=False, default_flow_style=False, width=100, allow_unicode=True
    )
