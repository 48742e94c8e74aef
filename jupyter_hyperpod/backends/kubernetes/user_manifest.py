"""A user's own PyTorchJob or HyperPodPyTorchJob manifest: read safely, checked with the
maintained models of its API and the operators' rules, policed like our own manifests
(manifest.py check_manifest, and more: a user's file may say anything), marked as ours.

Every refusal names the field path and, where the file has one, its line. Policy refusals are
403 and name the rule (`UserManifestPolicy`); a file the schema refuses is 400; what the
operator would accept but not run is a `FileProblem` with its fix (accepted with `fix`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from ...core.byo import FileChange, FileContext, FileProblem, PreparedFile
from ...core.errors import Forbidden, HyperPodError, InvalidRequest
from .manifest import (
    HYPERPOD,
    JOB_ID_LABEL,
    JOB_KINDS,
    KUBEFLOW,
    MANAGED_BY,
    MANAGER,
    MAX_RETRY_ANNOTATION,
    QUEUE_LABEL,
    USER_LABEL,
    auto_resume_namespace,
    label_value,
    validate_name,
)
from .safe_yaml import line_of, load_one

SHM = "/dev/shm"
TOP_LEVEL = {"apiVersion", "kind", "metadata", "spec"}
KUBEFLOW_REPLICAS = {"Master", "Worker"}


@dataclass
class UserManifestPolicy:
    """What an admin allows in a user's manifest (KubernetesOrchestrator traits, README)."""

    namespace: str
    allowed_namespaces: list[str]
    pvc_name: str
    fs_mount: str
    """Where the claim's root is as the cluster sees it (`cluster_fs_root`)."""
    host_paths: list[str] = field(default_factory=list)
    service_accounts: list[str] = field(default_factory=list)
    run_as_owner: dict[str, int] | None = None
    """runAsUser/runAsGroup forced on every pod (the partition owner's), when the admin says."""
    serves_trainjob: Callable[[], bool | None] = lambda: False
    """Whether the cluster serves Kubeflow Trainer's TrainJob (API discovery; None: unknown)."""


def _forbid(rule: str, path: str, lines: dict[str, int], message: str) -> Forbidden:
    return Forbidden(f"{line_of(lines, path)}{path}: {message} (rule: {rule})", field=path)


def _invalid(path: str, lines: dict[str, int], message: str) -> InvalidRequest:
    return InvalidRequest(f"{line_of(lines, path)}{path}: {message}", field=path)


# -- the object and its pod templates ---------------------------------------------------------
def _kind(obj: dict[str, Any], lines: dict[str, int]) -> tuple[str, str, str, str]:
    kind, api = obj.get("kind"), obj.get("apiVersion")
    if kind not in JOB_KINDS:
        raise _invalid(
            "kind",
            lines,
            f"'{kind}' is not a training job: apply a PyTorchJob ({KUBEFLOW[0]}/{KUBEFLOW[1]}), "
            f"a HyperPodPyTorchJob ({HYPERPOD[0]}/{HYPERPOD[1]}) or, where the cluster serves "
            "it, a TrainJob (trainer.kubeflow.org/v1alpha1)",
        )
    group, version, plural, title = JOB_KINDS[str(kind)]
    if api != f"{group}/{version}":
        raise _invalid("apiVersion", lines, f"a {title} is apiVersion {group}/{version}, not {api}")
    extra = sorted(set(obj) - TOP_LEVEL)
    if extra:
        what = "is written by the operator" if extra == ["status"] else "is not part of a job"
        raise _invalid(extra[0], lines, f"{', '.join(extra)} {what}: remove it")
    return group, version, plural, title


def replicas_of(obj: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(path, replica type, replica spec) of each replica of either kind."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == KUBEFLOW[3]:
        for name, replica in (spec.get("pytorchReplicaSpecs") or {}).items():
            yield f"spec.pytorchReplicaSpecs.{name}", name, replica or {}
    else:
        for index, replica in enumerate(spec.get("replicaSpecs") or []):
            yield f"spec.replicaSpecs[{index}]", str((replica or {}).get("name")), replica or {}


def _count(replica: dict[str, Any]) -> int:
    value = replica.get("replicas", 1)
    return value if isinstance(value, int) and value >= 0 else 1


# -- the maintained models ----------------------------------------------------------------------
def _paths(obj: Any, prefix: str) -> set[str]:
    if isinstance(obj, dict):
        found: set[str] = set()
        for key, value in obj.items():
            if value is not None:
                found.add(f"{prefix}.{key}" if prefix else key)
                found |= _paths(value, f"{prefix}.{key}" if prefix else key)
        return found
    if isinstance(obj, list):
        return {p for i, item in enumerate(obj) for p in _paths(item, f"{prefix}[{i}]")}
    return set()


def _quantities(obj: Any) -> Any:
    """Resource quantities may be numbers in YAML; the client's models type them as strings."""
    if isinstance(obj, dict):
        return {
            k: {q: str(v) for q, v in val.items()}
            if k in ("requests", "limits") and isinstance(val, dict)
            else _quantities(val)
            for k, val in obj.items()
        }
    if isinstance(obj, list):
        return [_quantities(item) for item in obj]
    return obj


def _check_model(model: Any, value: Any, path: str, lines: dict[str, int]) -> None:
    """`value` against a `kubernetes` client model: types as it loads, and every field must
    come back (the models drop fields they do not know: a typo, or another version's)."""
    if not isinstance(value, dict):
        raise _invalid(path, lines, f"must be a mapping ({model.__name__})")
    value = _quantities(value)
    try:
        back = model.from_dict(value).to_dict(serialize=True)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise _invalid(
            path, lines, f"{error.title}.{where}: {first.get('msg')}" if where else str(error)
        ) from None
    except (TypeError, ValueError) as error:
        raise _invalid(path, lines, f"not a valid {model.__name__}: {error}") from None
    unknown = sorted(_paths(value, path) - _paths(back, path))
    if unknown:
        raise _invalid(unknown[0], lines, f"{model.__name__} has no such field")


def _check_pod_template(template: Any, path: str, lines: dict[str, int]) -> None:
    """The pod template with the `kubernetes` client's models, each container and volume on its
    own so that an error names its index."""
    from kubernetes.client import V1Container, V1ObjectMeta, V1PodSpec, V1Volume

    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise _invalid(f"{path}.spec", lines, "a pod template needs a spec with containers")
    unknown = sorted(set(template) - {"metadata", "spec"})
    if unknown:
        raise _invalid(f"{path}.{unknown[0]}", lines, "V1PodTemplateSpec has no such field")
    if "metadata" in template:
        _check_model(V1ObjectMeta, template["metadata"], f"{path}.metadata", lines)
    pod = template["spec"]
    for key, model in (
        ("containers", V1Container),
        ("initContainers", V1Container),
        ("volumes", V1Volume),
    ):
        items = pod.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise _invalid(f"{path}.spec.{key}", lines, "must be a list")
        for index, item in enumerate(items):
            _check_model(model, item, f"{path}.spec.{key}[{index}]", lines)
    if not pod.get("containers"):
        raise _invalid(f"{path}.spec.containers", lines, "a pod needs at least one container")
    rest = {k: v for k, v in pod.items() if k not in ("containers", "initContainers", "volumes")}
    rest["containers"] = [{"name": "x"}]
    _check_model(V1PodSpec, rest, f"{path}.spec", lines)


def _check_job_fields(obj: dict[str, Any], lines: dict[str, int]) -> list[str]:
    """The job's own fields with the Kubeflow Training SDK's models (PyTorchJob), where that
    package is installed; the shape AWS's CRD has (HyperPodPyTorchJob) by hand."""
    from kubernetes.client import V1ObjectMeta

    warnings: list[str] = []
    _check_model(V1ObjectMeta, obj.get("metadata") or {}, "metadata", lines)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise _invalid("spec", lines, "the job needs a spec")
    if obj["kind"] == KUBEFLOW[3]:
        replicas = spec.get("pytorchReplicaSpecs")
        if not isinstance(replicas, dict) or not replicas:
            raise _invalid("spec.pytorchReplicaSpecs", lines, "needs a Worker (or Master)")
        for name in replicas:
            if name not in KUBEFLOW_REPLICAS:
                raise _invalid(
                    f"spec.pytorchReplicaSpecs.{name}",
                    lines,
                    f"a PyTorchJob has Master and Worker replicas, not '{name}'",
                )
        try:
            from kubeflow.training import ApiClient
        except ImportError:
            warnings.append(
                "the PyTorchJob's own fields were not checked with the Kubeflow Training SDK "
                "(pip install kubeflow-training): the API server checks them"
            )
        else:
            _check_sdk(ApiClient(), obj, lines)
    else:
        replicas = spec.get("replicaSpecs")
        if not isinstance(replicas, list) or not replicas:
            raise _invalid("spec.replicaSpecs", lines, "needs at least one replica spec")
        known = {"nprocPerNode", "replicaSpecs", "runPolicy", "suspend", "managedBy"}
        for key in spec:
            if key not in known:
                raise _invalid(f"spec.{key}", lines, "HyperPodPyTorchJob has no such field")
    for path, _name, replica in replicas_of(obj):
        if not isinstance(replica, dict):
            raise _invalid(path, lines, "must be a mapping")
        count = replica.get("replicas", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise _invalid(f"{path}.replicas", lines, "must be a whole number of at least 1")
        _check_pod_template(replica.get("template"), f"{path}.template", lines)
    return warnings


class _Response:
    def __init__(self, text: str) -> None:
        self.data = text


def _check_sdk(client: Any, obj: dict[str, Any], lines: dict[str, int]) -> None:
    import json

    job = copy.deepcopy(obj)
    job["metadata"] = {}
    # The SDK's model requires runPolicy; the CRD does not (kubeflow.org_pytorchjobs.yaml
    # requires only pytorchReplicaSpecs): an absent one is the operator's defaults.
    job["spec"].setdefault("runPolicy", {})
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        if isinstance(replica, dict):
            replica["template"] = {}
    try:
        loaded = client.deserialize(_Response(json.dumps(job)), "KubeflowOrgV1PyTorchJob")
    except (ValueError, TypeError) as error:
        raise _invalid("spec", lines, f"not a valid PyTorchJob: {error}") from None
    back = client.sanitize_for_serialization(loaded)
    unknown = sorted(_paths(job, "") - _paths(back, ""))
    if unknown:
        raise _invalid(unknown[0], lines, "PyTorchJob (kubeflow.org/v1) has no such field")


# -- the admin's policy -----------------------------------------------------------------------
def _check_pods(
    obj: dict[str, Any], lines: dict[str, int], policy: UserManifestPolicy, ctx: FileContext
) -> None:
    for path, _name, replica in replicas_of(obj):
        pod_path = f"{path}.template.spec"
        pod = replica["template"]["spec"]
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.get(key):
                raise _forbid(f"no {key}", f"{pod_path}.{key}", lines, f"jobs cannot use {key}")
        account = pod.get("serviceAccountName") or pod.get("serviceAccount")
        if account:
            key = "serviceAccountName" if pod.get("serviceAccountName") else "serviceAccount"
            if account not in policy.service_accounts:
                allowed = ", ".join(policy.service_accounts) or "none: leave it out"
                raise _forbid(
                    "allowed service accounts",
                    f"{pod_path}.{key}",
                    lines,
                    f"service account '{account}' is not allowed (allowed: {allowed})",
                )
        claims = _check_volumes(pod, pod_path, lines, policy)
        for key in ("containers", "initContainers", "ephemeralContainers"):
            for index, container in enumerate(pod.get(key) or []):
                cpath = f"{pod_path}.{key}[{index}]"
                _check_privileges(container, cpath, lines)
                mounts = _check_mounts(container, cpath, lines, claims, policy, ctx)
                _check_paths(container, cpath, mounts, ctx)


def _check_volumes(
    pod: dict[str, Any], pod_path: str, lines: dict[str, int], policy: UserManifestPolicy
) -> set[str]:
    """Only the partition's claim, emptyDir, /dev/shm and the hostPaths the admin lists; the
    names of the volumes that are the claim."""
    claims: set[str] = set()
    for index, volume in enumerate(pod.get("volumes") or []):
        vpath = f"{pod_path}.volumes[{index}]"
        sources = sorted(set(volume) - {"name"})
        if sources == ["emptyDir"]:
            continue
        if sources == ["hostPath"]:
            host = str((volume["hostPath"] or {}).get("path") or "")
            if host.rstrip("/") == SHM or host in policy.host_paths:
                continue
            listed = ", ".join([SHM, *policy.host_paths])
            raise _forbid(
                "host paths",
                f"{vpath}.hostPath.path",
                lines,
                f"host path {host} is not one the admin allows ({listed})",
            )
        if sources == ["persistentVolumeClaim"]:
            claim = (volume["persistentVolumeClaim"] or {}).get("claimName")
            if claim == policy.pvc_name:
                claims.add(str(volume.get("name")))
                continue
            raise _forbid(
                "volumes",
                f"{vpath}.persistentVolumeClaim.claimName",
                lines,
                f"claim '{claim}' is not the shared file system's ({policy.pvc_name})",
            )
        raise _forbid(
            "volumes",
            vpath,
            lines,
            f"volume source {', '.join(sources) or '(none)'} is not allowed: use the claim "
            f"{policy.pvc_name}, emptyDir, {SHM} or a host path the admin lists",
        )
    return claims


def _check_privileges(container: dict[str, Any], cpath: str, lines: dict[str, int]) -> None:
    context = container.get("securityContext") or {}
    spath = f"{cpath}.securityContext"
    if context.get("privileged"):
        raise _forbid("no privileged", f"{spath}.privileged", lines, "jobs cannot be privileged")
    if context.get("allowPrivilegeEscalation"):
        raise _forbid(
            "no privilege escalation",
            f"{spath}.allowPrivilegeEscalation",
            lines,
            "jobs cannot allow privilege escalation",
        )
    added = (context.get("capabilities") or {}).get("add") or []
    if added:
        raise _forbid(
            "no added capabilities",
            f"{spath}.capabilities.add",
            lines,
            f"jobs cannot add capabilities ({', '.join(map(str, added))})",
        )


def _check_mounts(
    container: dict[str, Any],
    cpath: str,
    lines: dict[str, int],
    claims: set[str],
    policy: UserManifestPolicy,
    ctx: FileContext,
) -> list[tuple[str, str]]:
    """The claim's mounts: read-write only below the partition (subPath). Returns (mountPath,
    the cluster path it shows) for each, longest first."""
    shown: list[tuple[str, str]] = []
    for index, mount in enumerate(container.get("volumeMounts") or []):
        if mount.get("name") not in claims:
            continue
        mpath = f"{cpath}.volumeMounts[{index}]"
        if mount.get("subPathExpr"):
            raise _forbid(
                "claim mounts", f"{mpath}.subPathExpr", lines, "use subPath, not subPathExpr"
            )
        sub = str(mount.get("subPath") or "").strip("/")
        target = f"{policy.fs_mount.rstrip('/')}/{sub}" if sub else policy.fs_mount
        if not mount.get("readOnly"):
            if not sub:
                raise _forbid(
                    "claim mounts",
                    mpath,
                    lines,
                    f"the shared file system is mounted read-write only below your partition "
                    f"({ctx.partition}): add subPath: "
                    f"{ctx.partition[len(policy.fs_mount) :].strip('/') or '<your partition>'}"
                    " or readOnly: true",
                )
            ctx.check_path(target, f"{mpath}.subPath")
        shown.append((str(mount.get("mountPath") or "").rstrip("/") or "/", target))
    return sorted(shown, key=lambda item: -len(item[0]))


_ABSOLUTE = re.compile(r"(?<![\w.$/-])(/[^\s'\"`;|&<>()=,]+)")


def _texts(container: dict[str, Any], cpath: str) -> Iterator[tuple[str, str]]:
    for key in ("command", "args"):
        for index, part in enumerate(container.get(key) or []):
            yield f"{cpath}.{key}[{index}]", str(part)
    for index, item in enumerate(container.get("env") or []):
        if isinstance(item, dict) and isinstance(item.get("value"), str):
            yield f"{cpath}.env[{index}].value", item["value"]
    if container.get("workingDir"):
        yield f"{cpath}.workingDir", str(container["workingDir"])


def _check_paths(
    container: dict[str, Any], cpath: str, mounts: list[tuple[str, str]], ctx: FileContext
) -> None:
    """Every absolute path the container names on the shared file system, as the cluster sees
    it, through the one partition check."""
    for where, text in _texts(container, cpath):
        for match in _ABSOLUTE.finditer(text):
            path = match.group(1)
            for mount_path, target in mounts:
                if path == mount_path or path.startswith(mount_path.rstrip("/") + "/"):
                    rest = path[len(mount_path) :].lstrip("/")
                    ctx.check_path(f"{target.rstrip('/')}/{rest}" if rest else target, where)
                    break


# -- the operators' rules (problems with their fix) ---------------------------------------
_TORCHRUN = re.compile(r"\b(torchrun|torch\.distributed\.run|torch\.distributed\.launch)\b")
_NNODES = re.compile(r"--nnodes[=\s]+['\"]?(\d+)(?::(\d+))?")
_RDZV = re.compile(r"--(rdzv[-_]endpoint|master[-_]addr)\b")


def _command_text(template: dict[str, Any]) -> str:
    parts: list[str] = []
    for container in (template.get("spec") or {}).get("containers") or []:
        parts += [str(p) for p in (container.get("command") or []) + (container.get("args") or [])]
    return " ".join(parts)


def kubeflow_problems(obj: dict[str, Any], lines: dict[str, int]) -> list[tuple[FileProblem, Any]]:
    """What the Kubeflow training operator accepts but cannot run, each with a fix (a function
    that mends a copy of the object). The env rules are the operator's
    (pkg/controller.v1/pytorch/envvar.go, elastic.go; tests/kubernetes/controller.py):
    MASTER_ADDR, RANK and WORLD_SIZE only with a Master replica, PET_RDZV_ENDPOINT only with an
    elasticPolicy: a Worker-only job of several pods without one tells no pod where rank 0 is."""
    found: list[tuple[FileProblem, Any]] = []
    spec = obj["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    worker = replicas.get("Worker") or {}
    workers = _count(worker) if "Worker" in replicas else 0
    command = _command_text(worker.get("template") or {})
    lonely = workers > 1 and "Master" not in replicas and "elasticPolicy" not in spec
    if lonely and _TORCHRUN.search(command) and not _RDZV.search(command):
        nnodes = _NNODES.search(command)
        said = f"torchrun --nnodes={nnodes.group(1)}" if nnodes else "torchrun"

        def add_elastic(target: dict[str, Any], n: int = workers) -> str:
            target["spec"]["elasticPolicy"] = {
                "rdzvBackend": "c10d",
                "minReplicas": n,
                "maxReplicas": n,
                "maxRestarts": 0,
            }
            return "spec.elasticPolicy"

        found.append(
            (
                FileProblem(
                    path="spec.pytorchReplicaSpecs",
                    message=(
                        f"{line_of(lines, 'spec.pytorchReplicaSpecs')}{workers} Workers, no "
                        f"Master and no elasticPolicy, and {said} without a rendezvous "
                        "endpoint: the Kubeflow operator sets MASTER_ADDR/RANK only with a "
                        "Master and PET_RDZV_ENDPOINT only with an elasticPolicy, so no pod "
                        "learns where rank 0 is and every pod waits for a rendezvous that "
                        "never forms"
                    ),
                    fix=(
                        f"add spec.elasticPolicy (c10d, {workers}:{workers} nodes): the "
                        f"operator then points every worker at <job>-worker-0:23456"
                    ),
                ),
                add_elastic,
            )
        )
    if nnodes_match := _NNODES.search(command):
        wanted = int(nnodes_match.group(2) or nnodes_match.group(1))
        if workers and wanted != workers and "Master" not in replicas:
            found.append(
                (
                    FileProblem(
                        path="spec.pytorchReplicaSpecs.Worker.replicas",
                        message=(
                            f"{line_of(lines, 'spec.pytorchReplicaSpecs.Worker.replicas')}"
                            f"{workers} Worker pods but torchrun --nnodes={wanted}: the "
                            "rendezvous waits for nodes that never come"
                        ),
                        fix=f"set replicas to {wanted} or --nnodes to {workers}",
                    ),
                    None,
                )
            )
    retries = (obj["metadata"].get("annotations") or {}).get(MAX_RETRY_ANNOTATION)
    if retries is not None and str(retries).isdigit():
        limit = (spec.get("runPolicy") or {}).get("backoffLimit")
        if isinstance(limit, int) and limit < int(retries) + 1:

            def raise_limit(target: dict[str, Any], n: int = int(retries) + 1) -> str:
                target["spec"].setdefault("runPolicy", {})["backoffLimit"] = n
                return "spec.runPolicy.backoffLimit"

            found.append(
                (
                    FileProblem(
                        path="spec.runPolicy.backoffLimit",
                        message=(
                            f"{line_of(lines, 'spec.runPolicy.backoffLimit')}backoffLimit "
                            f"{limit} fails the job before HyperPod's {retries} retries: the "
                            "operator fails it once its pods' restarts reach backoffLimit"
                        ),
                        fix=f"set spec.runPolicy.backoffLimit to {int(retries) + 1}",
                    ),
                    raise_limit,
                )
            )
    return found


def _broken_lines(script: str) -> list[int]:
    """Indexes of the lines of a shell script that end a command the next line continues: the
    next line is an option (`-x`), or this one is an option line of such a run."""
    lines = script.split("\n")
    broken: list[int] = []
    for index in range(len(lines) - 1):
        here, after = lines[index].rstrip(), lines[index + 1].strip()
        if not here or not after or here.endswith(("\\", "|", "&&", ";")):
            continue
        in_run = here.lstrip().startswith("-") and bool(broken) and broken[-1] == index - 1
        if after.startswith("-") or in_run:
            broken.append(index)
    return broken


def shell_problems(obj: dict[str, Any], lines: dict[str, int]) -> list[tuple[FileProblem, Any]]:
    """A `bash -c` script (a YAML `|` block keeps its line ends) whose options are on lines of
    their own: bash ends the command at each line end and runs `--nnodes=8` as a command."""
    found: list[tuple[FileProblem, Any]] = []
    for path, _name, replica in replicas_of(obj):
        containers = (replica["template"]["spec"].get("containers")) or []
        for cindex, container in enumerate(containers):
            for key in ("command", "args"):
                parts = container.get(key) or []
                for index, part in enumerate(parts):
                    if not isinstance(part, str) or "\n" not in part.strip():
                        continue
                    shell = [str(p) for p in (container.get("command") or [])[:2]]
                    if not (
                        shell and shell[0].rsplit("/", 1)[-1] in ("bash", "sh") and "-c" in shell
                    ):
                        continue
                    broken = _broken_lines(part)
                    if not broken:
                        continue
                    where = f"{path}.template.spec.containers[{cindex}].{key}[{index}]"
                    first = part.split("\n")[broken[0] + 1].strip().split()[0]

                    def join(
                        target: dict[str, Any],
                        at: str = where,
                        r: str = path,
                        c: int = cindex,
                        k: str = key,
                        i: int = index,
                    ) -> str:
                        found_replica = next(rep for p, _n, rep in replicas_of(target) if p == r)
                        items = found_replica["template"]["spec"]["containers"][c][k]
                        text = items[i].split("\n")
                        for line in _broken_lines(items[i]):
                            text[line] = text[line].rstrip() + " \\"
                        items[i] = "\n".join(text)
                        return at

                    found.append(
                        (
                            FileProblem(
                                path=where,
                                message=(
                                    f"{line_of(lines, where)}the script's lines end its commands: "
                                    f"bash runs '{first}' as a command of its own (the line "
                                    "before it does not end with '\\')"
                                ),
                                fix="end each continued line with ' \\'",
                            ),
                            join,
                        )
                    )
    return found


_TORCHRUN_WORD = re.compile(r"(?<![\w./-])((?:\S*/)?torchrun)(?![\w.-])")


def hyperpod_problems(obj: dict[str, Any], lines: dict[str, int]) -> list[tuple[FileProblem, Any]]:
    """The HyperPod training operator starts, stops and restarts the workers through the
    HyperPod elastic agent (AWS docs, "HyperPod training operator": the container runs
    `hyperpodrun`, torchrun's drop-in that serves the operator's calls): a container that
    runs torchrun instead never reports to the operator."""
    found: list[tuple[FileProblem, Any]] = []
    for path, _name, replica in replicas_of(obj):
        for cindex, container in enumerate(replica["template"]["spec"].get("containers") or []):
            for key in ("command", "args"):
                for index, part in enumerate(container.get(key) or []):
                    if not isinstance(part, str) or "hyperpodrun" in part:
                        continue
                    if not _TORCHRUN_WORD.search(part):
                        continue
                    where = f"{path}.template.spec.containers[{cindex}].{key}[{index}]"

                    def swap(
                        target: dict[str, Any],
                        at: str = where,
                        r: str = path,
                        c: int = cindex,
                        k: str = key,
                        i: int = index,
                    ) -> str:
                        found_replica = next(rep for p, _n, rep in replicas_of(target) if p == r)
                        items = found_replica["template"]["spec"]["containers"][c][k]
                        items[i] = _TORCHRUN_WORD.sub("hyperpodrun", items[i])
                        return at

                    found.append(
                        (
                            FileProblem(
                                path=where,
                                message=(
                                    f"{line_of(lines, where)}a HyperPodPyTorchJob's workers run "
                                    "under hyperpodrun, which the HyperPod training operator "
                                    "drives: with torchrun no worker reports to the operator"
                                ),
                                fix="run hyperpodrun (torchrun's options) instead of torchrun",
                            ),
                            swap,
                        )
                    )
    return found


# -- ours: labels, forced ids ---------------------------------------------------------------
def _set(
    target: dict[str, Any], key: str, value: Any, path: str, reason: str, changes: list[FileChange]
) -> None:
    if target.get(key) == value:
        return
    action = "changed" if key in target else "added"
    target[key] = value
    changes.append(FileChange(path=path, action=action, value=str(value), reason=reason))


def mark_ours(
    obj: dict[str, Any], ctx: FileContext, policy: UserManifestPolicy, namespace: str
) -> list[FileChange]:
    """Our labels on the job and its pods (so it is mine and adoptable: queue.py), the
    namespace when the file names none, runAsUser/runAsGroup when the admin forces them."""
    changes: list[FileChange] = []
    meta = obj["metadata"]
    _set(meta, "namespace", namespace, "metadata.namespace", "the default namespace", changes)
    ours = {
        MANAGED_BY: MANAGER,
        JOB_ID_LABEL: ctx.job_id,
        **({USER_LABEL: label_value(ctx.user)} if label_value(ctx.user) else {}),
    }
    why = "tracked as your job (job id, owner)"
    labels = meta.setdefault("labels", {})
    for key, value in ours.items():
        _set(labels, key, value, f"metadata.labels.{key}", why, changes)
    for path, _name, replica in replicas_of(obj):
        template = replica["template"]
        tmeta = template.setdefault("metadata", {})
        tlabels = tmeta.setdefault("labels", {})
        for key, value in ours.items():
            _set(tlabels, key, value, f"{path}.template.metadata.labels.{key}", why, changes)
        if labels.get(QUEUE_LABEL) and QUEUE_LABEL not in tlabels:
            _set(
                tlabels,
                QUEUE_LABEL,
                labels[QUEUE_LABEL],
                f"{path}.template.metadata.labels.{QUEUE_LABEL}",
                "Kueue reads the queue on the pods too",
                changes,
            )
        if policy.run_as_owner:
            pod = template["spec"]
            context = pod.setdefault("securityContext", {})
            for key in ("runAsUser", "runAsGroup"):
                _set(
                    context,
                    key,
                    policy.run_as_owner[key],
                    f"{path}.template.spec.securityContext.{key}",
                    "the admin runs jobs as the partition's owner",
                    changes,
                )
            for kind in ("containers", "initContainers"):
                for index, container in enumerate(pod.get(kind) or []):
                    own = container.get("securityContext") or {}
                    for key in ("runAsUser", "runAsGroup"):
                        if key in own:
                            _set(
                                own,
                                key,
                                policy.run_as_owner[key],
                                f"{path}.template.spec.{kind}[{index}].securityContext.{key}",
                                "the admin runs jobs as the partition's owner",
                                changes,
                            )
    return changes


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (a `bash -c` script) as `|` blocks, as people write them."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = (
        "|"
        if "\n" in value and not any(line != line.rstrip() for line in value.split("\n"))
        else None
    )
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def to_yaml(obj: dict[str, Any]) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)


def _required_name(meta: dict[str, Any], lines: dict[str, int]) -> str:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _invalid("metadata.name", lines, "the job needs a name")
    return name


def _allowed_namespace(
    meta: dict[str, Any], lines: dict[str, int], policy: UserManifestPolicy
) -> Any:
    """The job's namespace (the policy's default when it names none), if the admin allows it
    (only one of the allowed names passes: a value that is not a string never does)."""
    allowed = policy.allowed_namespaces or [policy.namespace]
    namespace = meta.get("namespace") or policy.namespace
    if namespace not in allowed:
        raise _forbid(
            "allowed namespaces",
            "metadata.namespace",
            lines,
            f"namespace '{namespace}' is not allowed (allowed: {', '.join(allowed)})",
        )
    return namespace


def prepare_manifest(
    ctx: FileContext,
    policy: UserManifestPolicy,
    loaded: tuple[dict[str, Any], dict[str, int]] | None = None,
) -> PreparedFile:
    """The user's manifest as it will be sent: checked, policed, marked; problems with fixes.
    `loaded`: the file already parsed (`load_one`), by a caller that looked at its kind."""
    obj, lines = loaded or load_one(ctx.text)
    original = to_yaml(obj)
    kind = _kind(obj, lines)[3]
    warnings = _check_job_fields(obj, lines)
    meta = obj.setdefault("metadata", {})
    if meta.get("generateName") and not meta.get("name"):
        raise _invalid("metadata.generateName", lines, "give the job a name (metadata.name)")
    name = _required_name(meta, lines)
    pods = sum(_count(replica) for _path, _n, replica in replicas_of(obj))
    worker_pods = max((_count(r) for _p, _n, r in replicas_of(obj)), default=1)
    try:
        validate_name(name, "metadata.name", kind, worker_pods)
    except HyperPodError as error:
        raise _invalid("metadata.name", lines, error.message) from None
    namespace = _allowed_namespace(meta, lines, policy)
    annotations = meta.get("annotations") or {}
    if (
        kind == KUBEFLOW[3]
        and str(annotations.get("sagemaker.amazonaws.com/enable-job-auto-resume")) == "true"
        and not auto_resume_namespace(namespace)
    ):
        raise _invalid(
            "metadata.namespace",
            lines,
            f"HyperPod auto-resume runs a PyTorchJob only in namespace 'kubeflow' or one "
            f"whose name starts with 'hyperpod', not '{namespace}'",
        )
    _check_pods(obj, lines, policy, ctx)
    found = shell_problems(obj, lines)
    found += kubeflow_problems(obj, lines) if kind == KUBEFLOW[3] else hyperpod_problems(obj, lines)
    changes = mark_ours(obj, ctx, policy, namespace)
    sent = copy.deepcopy(obj)
    fixed = ""
    if found:
        mended = copy.deepcopy(obj)
        mended_paths = {problem.path: mend(mended) for problem, mend in found if mend is not None}
        fixed = to_yaml(mended)
        if ctx.fix and all(mend is not None for _p, mend in found):
            sent = mended
            for problem, _mend in found:
                changes.append(
                    FileChange(
                        path=mended_paths[problem.path],
                        action="added",
                        value=problem.fix,
                        reason="fix accepted",
                    )
                )
    template = next(iter(replicas_of(sent)))[2]["template"]
    containers = template["spec"]["containers"]
    container = next((c for c in containers if c.get("name") == "pytorch"), containers[0])
    resources = container.get("resources") or {}
    gpus = (resources.get("limits") or resources.get("requests") or {}).get("nvidia.com/gpu", 0)
    return PreparedFile(
        format="manifest",
        language="yaml",
        original=original,
        text=to_yaml(sent),
        changes=changes,
        problems=[problem for problem, _mend in found],
        fixed=fixed,
        name=name,
        nodes=max(1, pods),
        gpus_per_node=int(gpus) if str(gpus).isdigit() else 0,
        command=[*(container.get("command") or []), *(container.get("args") or [])],
        image=container.get("image"),
        kind=kind,
        namespace=namespace,
        queue=(meta.get("labels") or {}).get(QUEUE_LABEL),
        warnings=warnings,
        payload=sent,
    )


__all__ = ["UserManifestPolicy", "kubeflow_problems", "prepare_manifest", "replicas_of"]
