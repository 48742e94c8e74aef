"""A `Launch` as a HyperPod `HyperPodPyTorchJob` or a Kubeflow `PyTorchJob`, in the shape of the
seed's `pod-finetuning.yaml`, plus the checks that keep a job spec inside what the admin allows.

What the operators do with these objects (and so what this module must render) is written down,
with the operator source it comes from, in tests/kubernetes/controller.py, the operator double the
tests run these manifests through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ...core.backend import Launch
from ...core.errors import Forbidden, InvalidRequest
from ...core.launch import program_argv, torchrun_argv, uses_torchrun
from ...core.models import JobSpec
from ...core.watchdog import config_for
from .log_monitoring import log_monitoring_rules
from .nodes import DEEP_HEALTH_LABEL, EFA_RESOURCE, HEALTH_LABEL

KUBEFLOW = ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
HYPERPOD = ("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs", "HyperPodPyTorchJob")
JOB_KINDS = {HYPERPOD[3]: HYPERPOD, KUBEFLOW[3]: KUBEFLOW}

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "jupyter-hyperpod"
JOB_ID_LABEL = "hyperpod.jupyter.org/job-id"
USER_LABEL = "hyperpod.jupyter.org/user"
# Kueue (HyperPod task governance): the LocalQueue and the WorkloadPriorityClass of a workload,
# on the job and on its pod template as AWS's own template does (hyperpod-pytorch-job-template).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KUBEFLOW_JOB_LABEL = "training.kubeflow.org/job-name"
KUBEFLOW_INDEX_LABEL = "training.kubeflow.org/replica-index"
HPJOB_LABEL = "HPJob"
AUTO_RESUME_ANNOTATION = "sagemaker.amazonaws.com/enable-job-auto-resume"
MAX_RETRY_ANNOTATION = "sagemaker.amazonaws.com/job-max-retry-count"
CONTAINER = "pytorch"
# training-operator pkg/apis/kubeflow.org/v1/pytorch_types.go: the port the operator reads for
# PET_RDZV_ENDPOINT (elastic.go getPortFromPyTorchJob) and puts on the headless Services.
KUBEFLOW_PORT_NAME = "pytorchjob-port"
KUBEFLOW_PORT = 23456
# hyperpod-elastic-agent README: hyperpodrun's server (--server-port), which the HyperPod
# training operator calls to start, stop and update the workers.
HYPERPOD_AGENT_PORT = 8080
KUBEFLOW_REPLICA = "worker"
HYPERPOD_REPLICA = "pods"
DEFAULT_AUTO_RESUME_RETRIES = 3

# DNS-1035 (the Kubeflow webhook's NameIsDNS1035Label, pytorchjob_webhook.go): a letter first.
DNS1035_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
NAME_RE = DNS1035_RE
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$")
_DOLLAR = re.compile(r"\$(?=[$(])")
MAX_LABEL = 63


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
    watchdog_settings: Any = None
    """The HyperPodSettings whose watchdog_* defaults a HyperPodPyTorchJob's
    logMonitoringConfiguration takes (None: no rules)."""
    # Kueue as the cluster has it: LocalQueues by namespace and the WorkloadPriorityClasses;
    # None where Kueue is not installed (or could not be read): then any name is passed on.
    local_queues: dict[str, list[str]] | None = None
    priority_classes: list[str] | None = None


def k8s_escape(text: str) -> str:
    """Kubernetes expands `$(VAR)` in command, args and env values and turns `$$` into `$`: double
    each `$` that precedes `$` or `(`, so that user text arrives literally."""
    return _DOLLAR.sub("$$", text)


def label_value(text: str) -> str:
    """Any text as a valid label value (<= 63 chars, alphanumerics at both ends)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63].strip("-_.")
    return cleaned


def replica_name(kind: str) -> str:
    return HYPERPOD_REPLICA if kind == HYPERPOD[3] else KUBEFLOW_REPLICA


def max_name_length(kind: str, replicas: int) -> int:
    """The longest job id whose derived objects stay valid: the operator names each pod and its
    headless Service `<job>-<replica>-<index>` (training-operator pkg/core/utils.go
    GenGeneralName, pkg/controller.v1/common/service.go), a DNS-1035 label of at most 63."""
    return MAX_LABEL - len(f"-{replica_name(kind)}-{max(replicas - 1, 0)}")


def validate_name(
    name: str, what: str = "name", kind: str = KUBEFLOW[3], replicas: int = 1
) -> None:
    if not DNS1035_RE.match(name):
        raise InvalidRequest(
            f"'{name}' is not a valid Kubernetes job name: lowercase letters, digits and '-', "
            "starting with a letter and ending with a letter or digit (DNS-1035, which the "
            "training operators require)",
            field=what,
        )
    longest = max_name_length(kind, replicas)
    if len(name) > longest:
        derived = f"{name}-{replica_name(kind)}-{max(replicas - 1, 0)}"
        raise InvalidRequest(
            f"the job name is {len(name) - longest} character(s) too long for a {kind} of "
            f"{replicas} node(s): the operator names its pods and Services '{derived}', which "
            f"must be at most {MAX_LABEL} characters",
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


def auto_resume_namespace(namespace: str) -> bool:
    """AWS docs (HyperPod EKS, "run jobs with kubectl"): HyperPod auto-resume watches Kubeflow
    jobs only in the namespace `kubeflow` or one whose name starts with `hyperpod`."""
    return namespace == "kubeflow" or namespace.startswith("hyperpod")


def resolve_namespace(spec: JobSpec, options: ManifestOptions, kind: str) -> str:
    allowed = options.allowed_namespaces or [options.namespace]
    needs_eligible = spec.auto_resume and kind == KUBEFLOW[3]
    eligible = [ns for ns in allowed if auto_resume_namespace(ns)]
    rule = "namespace 'kubeflow' or one whose name starts with 'hyperpod'"
    if spec.namespace:
        namespace = spec.namespace
        if namespace not in allowed:
            raise Forbidden(
                f"namespace '{namespace}' is not allowed (allowed: {', '.join(allowed)})",
                field="namespace",
            )
        if needs_eligible and not auto_resume_namespace(namespace):
            raise InvalidRequest(
                f"HyperPod auto-resume runs a PyTorchJob only in {rule}, not '{namespace}'"
                + (f": use {', '.join(eligible)}" if eligible else "")
                + " (or submit a HyperPodPyTorchJob)",
                field="namespace",
            )
        return namespace
    namespace = options.namespace
    if needs_eligible and not auto_resume_namespace(namespace):
        if not eligible:
            raise InvalidRequest(
                f"HyperPod auto-resume runs a PyTorchJob only in {rule}, and none of the allowed "
                f"namespaces ({', '.join(allowed)}) is one: ask the admin to allow one, or submit "
                "a HyperPodPyTorchJob",
                field="namespace",
            )
        namespace = eligible[0]
    return namespace


def retries(spec: JobSpec) -> int:
    """How many times a failed job is restarted: max_retries, or 3 with auto-resume and none set."""
    if spec.max_retries:
        return spec.max_retries
    return DEFAULT_AUTO_RESUME_RETRIES if spec.auto_resume else 0


def split_ranks(spec: JobSpec, kind: str = KUBEFLOW[3]) -> bool:
    """Several ranks share a pod's log: torchrun (and hyperpodrun) tag their lines so that we can
    split them."""
    launcher = kind == HYPERPOD[3] or uses_torchrun(spec, multi_node_cluster=True)
    return launcher and spec.procs_per_node > 1


def container_command(launch: Launch, python: str, kind: str = KUBEFLOW[3]) -> list[str]:
    spec = launch.spec
    program = [k8s_escape(part) for part in launch.command]
    if kind == HYPERPOD[3]:
        # The HyperPod training operator drives each pod through the HyperPod elastic agent, so
        # every HyperPodPyTorchJob starts with `hyperpodrun` (torchrun's arguments; it forces its
        # own `hyperpod` rendezvous, fed by the operator: hyperpod-elastic-agent run.py). It is
        # the container's PID 1 (exec form), so it receives the SIGTERM of a pod teardown.
        argv = torchrun_argv(
            program,
            nnodes=spec.nodes,
            nproc_per_node=spec.procs_per_node,
            rdzv_endpoint=None,
            torchrun="hyperpodrun",
        )
        if split_ranks(spec, kind):
            argv.insert(3, "--tee=3")
        return argv
    if uses_torchrun(spec, multi_node_cluster=True):
        # Multi-node: the job carries an elasticPolicy (c10d), so the training operator injects
        # PET_RDZV_BACKEND, PET_RDZV_ENDPOINT (<job>-worker-0:23456), PET_NNODES and
        # PET_MAX_RESTARTS into every worker (elastic.go), which torchrun reads as the defaults
        # of its options. One node: torchrun's local standalone rendezvous.
        argv = torchrun_argv(
            program,
            nnodes=spec.nodes,
            nproc_per_node=spec.procs_per_node,
            rdzv_endpoint=None,
        )
        if spec.nodes == 1:
            argv.insert(1, "--standalone")
        if split_ranks(spec):
            # Each local rank's output, prefixed "[default<local_rank>]:", on the pod log.
            argv.insert(4 if spec.nodes == 1 else 3, "--tee=3")
        return argv
    if spec.procs_per_node > 1:
        raise InvalidRequest(
            "the plain launcher runs one process per pod on Kubernetes: use torchrun for "
            "several processes per node",
            field="procs_per_node",
        )
    if spec.nodes > 1:
        # A Worker-only PyTorchJob gets no RANK, WORLD_SIZE or MASTER_ADDR (envvar.go sets
        # them only with a Master replica): several plain pods could not find each other.
        raise InvalidRequest(
            "the plain launcher cannot run several pods of a PyTorchJob (the operator gives its "
            "workers no rank variables): use torchrun",
            field="launcher",
        )
    return program_argv(program, python)


def check_governance(spec: JobSpec, namespace: str, options: ManifestOptions) -> None:
    """Queue and priority class: names the cluster has, when it is known which it has."""
    if spec.queue:
        if not LABEL_VALUE_RE.match(spec.queue) or len(spec.queue) > MAX_LABEL:
            raise InvalidRequest(f"'{spec.queue}' is not a valid queue name", field="queue")
        if options.local_queues is not None:
            queues = options.local_queues.get(namespace, [])
            if spec.queue not in queues:
                raise InvalidRequest(
                    f"namespace {namespace} has no Kueue LocalQueue '{spec.queue}' "
                    + (f"(choose from: {', '.join(queues)})" if queues else "(it has none)"),
                    field="queue",
                )
    if spec.priority_class:
        if not LABEL_VALUE_RE.match(spec.priority_class) or len(spec.priority_class) > MAX_LABEL:
            raise InvalidRequest(
                f"'{spec.priority_class}' is not a valid priority class name",
                field="priority_class",
            )
        if options.priority_classes is not None and spec.priority_class not in (
            options.priority_classes
        ):
            choices = options.priority_classes
            raise InvalidRequest(
                f"the cluster has no Kueue WorkloadPriorityClass '{spec.priority_class}' "
                + (f"(choose from: {', '.join(choices)})" if choices else "(it has none)"),
                field="priority_class",
            )


def build_manifest(launch: Launch, options: ManifestOptions) -> dict[str, Any]:
    spec = launch.spec
    group, version, _plural, kind = job_kind(spec.kind, options.kind)
    validate_name(launch.job_id, "name", kind, spec.nodes)
    namespace = resolve_namespace(spec, options, kind)
    image = spec.image or options.image
    if not image:
        raise InvalidRequest(
            "this job needs a container image (no default image is configured)", field="image"
        )
    if not IMAGE_RE.match(image):
        raise InvalidRequest(f"'{image}' is not a container image reference", field="image")
    check_governance(spec, namespace, options)

    labels = {
        MANAGED_BY: MANAGER,
        JOB_ID_LABEL: launch.job_id,
        **({USER_LABEL: label_value(launch.user)} if label_value(launch.user) else {}),
        **options.extra_labels,
    }
    if spec.queue:
        labels[QUEUE_LABEL] = spec.queue
    if spec.priority_class:
        labels[PRIORITY_LABEL] = spec.priority_class

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
        "command": container_command(launch, options.python, kind),
        "workingDir": launch.workdir,
        "env": [{"name": key, "value": k8s_escape(value)} for key, value in launch.env.items()],
        "ports": [
            {"name": "hyperpod-agent", "containerPort": HYPERPOD_AGENT_PORT}
            if kind == HYPERPOD[3]
            else {"name": KUBEFLOW_PORT_NAME, "containerPort": KUBEFLOW_PORT}
        ],
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
    if spec.exclude_nodes:
        # Not on these nodes: a required node affinity on the node's name (the
        # kubernetes.io/hostname label is the node's name on EKS), operator NotIn (API reference:
        # NodeSelectorRequirement "Valid operators are In, NotIn, Exists, DoesNotExist. Gt, Lt").
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "NotIn",
                                    "values": list(spec.exclude_nodes),
                                }
                            ]
                        }
                    ]
                }
            }
        }
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
    retry_count = retries(spec)

    metadata: dict[str, Any] = {"name": launch.job_id, "namespace": namespace, "labels": labels}
    run_policy: dict[str, Any] = {}
    if spec.time_limit_minutes:
        run_policy["activeDeadlineSeconds"] = spec.time_limit_minutes * 60
    if kind == KUBEFLOW[3]:
        if spec.auto_resume:
            metadata["annotations"] = {
                AUTO_RESUME_ANNOTATION: "true",
                MAX_RETRY_ANNOTATION: str(retry_count),
            }
        if retry_count:
            # pkg/core/job.go PastBackoffLimit fails the job once the restartCount of its
            # running pods reaches backoffLimit (0: at the first restart), so N restarts that
            # actually run need backoffLimit N + 1.
            run_policy["backoffLimit"] = retry_count + 1
        job_spec: dict[str, Any] = {
            "nprocPerNode": str(spec.procs_per_node),
            "runPolicy": run_policy,
        }
        if spec.nodes > 1 and uses_torchrun(spec, multi_node_cluster=True):
            # Worker-only with an elasticPolicy rather than a Master replica: every pod is alike
            # (`<job>-worker-<i>`, rank i, which the logs and rank views rely on), and the
            # operator hands torchrun its c10d rendezvous (PET_RDZV_ENDPOINT on worker 0's
            # Service). With a Master replica the operator sets MASTER_ADDR/RANK/WORLD_SIZE for
            # a static launch instead, rank 0 becomes a differently named pod and the workers
            # wait in an init container for the master's DNS name (initcontainer.go).
            job_spec["elasticPolicy"] = {
                "rdzvBackend": "c10d",
                "minReplicas": spec.nodes,
                "maxReplicas": spec.nodes,
                # torchrun restarts its worker group in place this many times (a rank that
                # crashed, or a peer pod that came back) before its pod fails.
                "maxRestarts": retry_count,
            }
        job_spec["pytorchReplicaSpecs"] = {
            "Worker": {
                "replicas": spec.nodes,
                # OnFailure: the kubelet restarts a failed container in place, counted by
                # backoffLimit; Never: a failed worker fails the job (pytorchjob_controller.go).
                "restartPolicy": "OnFailure" if retry_count else "Never",
                "template": template,
            }
        }
    else:
        # AWS's HyperPodPyTorchJob (hyperpod_pytorch_job_unified_config RunPolicy): the operator
        # itself restarts a faulty job up to jobMaxRetryCount times (no pod restartPolicy set,
        # as AWS's own template leaves it).
        run_policy["jobMaxRetryCount"] = retry_count
        run_policy["cleanPodPolicy"] = "None"
        if options.watchdog_settings is not None:
            watchdog = config_for(spec.watchdog, options.watchdog_settings)
            if watchdog.enabled:
                slow = spec.watchdog.slow_tokens_per_second if spec.watchdog else None
                run_policy["logMonitoringConfiguration"] = log_monitoring_rules(
                    watchdog, slow_below=slow
                )
        job_spec = {
            "nprocPerNode": str(spec.procs_per_node),
            "runPolicy": run_policy,
            "replicaSpecs": [
                {"name": HYPERPOD_REPLICA, "replicas": spec.nodes, "template": template}
            ],
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
