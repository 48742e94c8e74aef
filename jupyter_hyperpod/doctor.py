"""`jupyter hyperpod doctor`: can this machine act as the login node of the configured cluster?

Each check says pass / warn / fail / skip, what it saw, and the fix in one line. Every probe has a
time limit (subprocesses, sockets, HTTP, the Kubernetes and AWS clients), so a dead controller
or API server makes a check fail quickly instead of hanging the notebook.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from .core.errors import HyperPodError
from .render import Shown, Table

Status = Literal["pass", "warn", "fail", "skip"]
COMMAND_TIMEOUT = 10.0
CONNECT_TIMEOUT = 3.0
HTTP_TIMEOUT = 5.0
SLURM_COMMANDS = ("sbatch", "sinfo", "squeue", "scancel", "scontrol")
MUNGE_SOCKETS = ("/run/munge/munge.socket.2", "/var/run/munge/munge.socket.2")


@dataclass
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


class DoctorReport(Shown):
    def __init__(self, checks: list[Check], orchestrator: str, where: str) -> None:
        self.checks = checks
        self.orchestrator = orchestrator
        self.where = where

    @property
    def ok(self) -> bool:
        return all(check.status != "fail" for check in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if check.status == "fail"]

    def table(self) -> Table:
        failed = len(self.failed)
        summary = "all checks passed" if not failed else f"{failed} check(s) failed"
        return Table(
            ["check", "result", "detail", "fix"],
            [[c.name, c.status, c.detail, c.fix] for c in self.checks],
            title=f"login node checks for the {self.orchestrator} cluster ({self.where})",
            notes=[summary],
            colored=["result"],
        )

    def __getitem__(self, name: str) -> Check:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "orchestrator": self.orchestrator,
            "where": self.where,
            "checks": [asdict(check) for check in self.checks],
        }


def _guard(name: str, probe: Callable[[], Check | list[Check]]) -> list[Check]:
    """A check that crashes is a failed check, never a crashed doctor."""
    try:
        result = probe()
    except HyperPodError as error:
        return [Check(name, "fail", error.message, "see the message")]
    except Exception as error:
        return [Check(name, "fail", f"{type(error).__name__}: {error}", "see the message")]
    return result if isinstance(result, list) else [result]


# -- file system -------------------------------------------------------------------------------------


def _writable(directory: Path) -> str | None:
    """None when a file can be created and removed in directory, else why not."""
    try:
        with tempfile.NamedTemporaryFile(
            dir=directory, prefix=".hyperpod-doctor-", delete=True
        ) as handle:
            handle.write(b"ok")
            handle.flush()
    except OSError as error:
        return error.strerror or str(error)
    return None


def _mount_of(path: Path) -> tuple[str, str]:
    """(mount point, file system type) holding path."""
    import psutil

    best = ("/", "")
    resolved = str(path.resolve())
    for part in psutil.disk_partitions(all=True):
        mount = part.mountpoint
        inside = resolved == mount or resolved.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best[0]):
            best = (mount, part.fstype)
    return best


def check_shared_fs(settings: Any, kind: str) -> Check:
    root = Path(settings.shared_fs_root).expanduser()
    fix_root = "set c.HyperPodSettings.shared_fs_root (or $HYPERPOD_FS_ROOT) to where the shared file system is mounted"
    if not root.exists():
        if kind == "local":
            return Check(
                "shared file system",
                "warn",
                f"{root} does not exist yet; it is created on first use",
                "nothing to do for the local cluster",
            )
        return Check(
            "shared file system",
            "fail",
            f"{root} does not exist (not mounted?)",
            f"mount the cluster's shared file system (FSx for Lustre) there, or {fix_root}",
        )
    if not root.is_dir():
        return Check("shared file system", "fail", f"{root} is not a directory", fix_root)
    mount, fstype = _mount_of(root)
    problem = _writable(root)
    if problem:
        return Check(
            "shared file system",
            "fail",
            f"{root} is not writable: {problem}",
            f"give this user write access to {root} (chown/chmod) or {fix_root}",
        )
    detail = f"{root} on {mount} ({fstype or 'unknown type'}), writable"
    if kind != "local" and mount == "/" and fstype not in ("lustre", "nfs", "nfs4"):
        return Check(
            "shared file system",
            "warn",
            detail + "; it is on the root disk, not a shared mount",
            f"jobs on other nodes will not see these files: {fix_root}",
        )
    return Check("shared file system", "pass", detail)


def check_partition(settings: Any, partition: str | None) -> Check:
    from .files import partition_dir

    root = Path(settings.shared_fs_root).expanduser()
    path = Path(partition) if partition else partition_dir(root, settings.partition, settings.user)
    mode = f"partition mode '{settings.partition}', user {settings.user}"
    if not path.exists():
        ancestor = path.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not _writable(ancestor):
            return Check(
                "partition",
                "warn",
                f"{path} ({mode}) does not exist yet; it is created on first use",
            )
        return Check(
            "partition",
            "fail",
            f"{path} ({mode}) does not exist",
            f"create it (mkdir -p {path}) or set c.HyperPodSettings.partition",
        )
    problem = _writable(path)
    if problem:
        return Check(
            "partition",
            "fail",
            f"{path} is not writable: {problem}",
            f"give this user write access to {path}",
        )
    return Check("partition", "pass", f"{path} ({mode}), writable")


def check_job_store(settings: Any) -> Check:
    store = Path(settings.job_store).expanduser()
    directory = store.parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    problem = _writable(directory)
    if problem:
        return Check(
            "job history",
            "fail",
            f"cannot write {store}: {problem}",
            "set c.HyperPodSettings.job_store to a writable file",
        )
    return Check("job history", "pass", f"{store}")


# -- Slurm -------------------------------------------------------------------------------------------


def slurm_checks(settings: Any) -> list[Check]:
    from .backends.slurm.backend import SlurmOrchestrator
    from .backends.slurm.commands import parse_controllers

    orchestrator = SlurmOrchestrator(settings=settings)
    commands = orchestrator.commands
    checks: list[Check] = []
    missing = [name for name in SLURM_COMMANDS if not _found(commands.executable(name))]
    if missing:
        checks.append(
            Check(
                "Slurm commands",
                "fail",
                f"not found: {', '.join(missing)}",
                "install the Slurm client matching the cluster (apt-get install slurm-client) "
                "or set c.SlurmOrchestrator.bin_dir",
            )
        )
        return checks
    checks.append(
        Check(
            "Slurm commands",
            "pass",
            ", ".join(SLURM_COMMANDS) + f" in {Path(commands.executable('sbatch')).parent}",
        )
    )
    checks.extend(_guard("munge", check_munge))
    try:
        text = commands.run(
            "scontrol", ["show", "config"], timeout=COMMAND_TIMEOUT, probe=False
        ).stdout
    except HyperPodError as error:
        checks.append(
            Check(
                "Slurm controller",
                "fail",
                error.message,
                "check slurm.conf ($SLURM_CONF) matches the cluster and slurmctld runs",
            )
        )
        return checks
    controllers = parse_controllers(text)
    reachable, unreachable = [], []
    for controller in controllers:
        try:
            with socket.create_connection(
                (controller.host, controller.port), timeout=CONNECT_TIMEOUT
            ):
                reachable.append(f"{controller.host}:{controller.port}")
        except OSError as error:
            unreachable.append(f"{controller.host}:{controller.port} ({error.strerror or error})")
    if controllers and not reachable:
        checks.append(
            Check(
                "Slurm controller",
                "fail",
                f"cannot connect to {', '.join(unreachable)}",
                "start slurmctld, or open its port from this machine (security group / firewall)",
            )
        )
        return checks
    try:
        done = commands.run("sinfo", ["-h", "-o", "%P %a"], timeout=COMMAND_TIMEOUT, probe=False)
    except HyperPodError as error:
        checks.append(
            Check(
                "Slurm controller",
                "fail",
                error.message,
                "check that slurmctld runs and munge keys match",
            )
        )
        return checks
    checks.append(
        Check(
            "Slurm controller",
            "pass",
            "slurmctld at " + (", ".join(reachable) or "(default)") + " answers sinfo",
        )
    )
    partitions = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    names = [p.rstrip("*") for p in partitions]
    default = next((p.rstrip("*") for p in partitions if p.endswith("*")), None)
    wanted = orchestrator.partition
    if wanted and wanted not in names:
        checks.append(
            Check(
                "Slurm partition",
                "fail",
                f"'{wanted}' not in {', '.join(names) or 'no partitions'}",
                "set c.SlurmOrchestrator.partition to one of the listed partitions",
            )
        )
    elif not names:
        checks.append(
            Check(
                "Slurm partition",
                "fail",
                "sinfo lists no partition",
                "ask the admin to define a partition",
            )
        )
    else:
        chosen = wanted or default
        checks.append(
            Check(
                "Slurm partition",
                "pass" if chosen else "warn",
                f"jobs go to '{chosen}'"
                if chosen
                else f"no default partition among {', '.join(names)}",
                "" if chosen else "set c.SlurmOrchestrator.partition",
            )
        )
    return checks


def _found(executable: str) -> bool:
    return bool(shutil.which(executable)) or (
        os.path.isfile(executable) and os.access(executable, os.X_OK)
    )


def check_munge() -> Check:
    fix = "start munged with the cluster's /etc/munge/munge.key (systemctl start munge)"
    munge, unmunge = shutil.which("munge"), shutil.which("unmunge")
    if munge and unmunge:
        try:
            credential = subprocess.run(
                [munge, "-n"], capture_output=True, timeout=COMMAND_TIMEOUT, check=False
            )
            if credential.returncode != 0:
                return Check(
                    "munge",
                    "fail",
                    (credential.stderr.decode(errors="replace").strip() or "munge -n failed"),
                    fix,
                )
            decoded = subprocess.run(
                [unmunge],
                input=credential.stdout,
                capture_output=True,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Check("munge", "fail", "munge did not answer in time", fix)
        if decoded.returncode != 0:
            return Check(
                "munge",
                "fail",
                decoded.stderr.decode(errors="replace").strip() or "unmunge failed",
                fix,
            )
        return Check("munge", "pass", "munged encodes and decodes credentials")
    sockets = [path for path in MUNGE_SOCKETS if os.path.exists(path)]
    if sockets:
        return Check(
            "munge", "pass", f"munged socket {sockets[0]} (munge tools not installed to test it)"
        )
    return Check(
        "munge",
        "fail",
        "no munged socket and no munge tools",
        "install munge (apt-get install munge) and " + fix,
    )


# -- Kubernetes --------------------------------------------------------------------------------------


def kubernetes_checks(settings: Any) -> list[Check]:
    from .backends.kubernetes.backend import KubernetesOrchestrator
    from .backends.kubernetes.client import kubeconfig_paths
    from .backends.kubernetes.manifest import JOB_KINDS

    try:
        from kubernetes import client as k8s
        from kubernetes import config as kconfig
    except ImportError:
        return [
            Check(
                "Kubernetes client",
                "fail",
                "the kubernetes package is not installed",
                "pip install 'jupyter-hyperpod[kubernetes]'",
            )
        ]
    orchestrator = KubernetesOrchestrator(settings=settings)
    connect_fix = (
        "connect to the cluster: jupyter hyperpod connect CLUSTER (or aws eks update-kubeconfig)"
    )
    checks: list[Check] = []
    paths = [p for p in kubeconfig_paths(orchestrator.kubeconfig) if os.path.exists(p)]
    if not paths and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return [
            Check(
                "kubeconfig context",
                "fail",
                f"no kubeconfig at {', '.join(kubeconfig_paths(orchestrator.kubeconfig))}",
                connect_fix,
            )
        ]
    if paths:
        try:
            contexts, current = kconfig.list_kube_config_contexts(
                config_file=os.pathsep.join(paths)
            )
        except Exception as error:
            return [
                Check(
                    "kubeconfig context",
                    "fail",
                    f"cannot read {', '.join(paths)}: {error}",
                    connect_fix,
                )
            ]
        names = [c["name"] for c in contexts]
        wanted = orchestrator.context or (current or {}).get("name")
        if not wanted or wanted not in names:
            return [
                Check(
                    "kubeconfig context",
                    "fail",
                    f"context '{wanted or '(no current context)'}' not in {', '.join(names) or 'no contexts'}",
                    connect_fix + " or set c.KubernetesOrchestrator.context",
                )
            ]
        checks.append(Check("kubeconfig context", "pass", f"{wanted} in {', '.join(paths)}"))
    kube = orchestrator.kube
    try:
        api = kube.api_client
    except HyperPodError as error:
        return [*checks, Check("Kubernetes API", "fail", error.message, connect_fix)]
    timeout = (CONNECT_TIMEOUT, HTTP_TIMEOUT)
    try:
        version = k8s.VersionApi(api).get_code(_request_timeout=timeout)
        checks.append(
            Check(
                "Kubernetes API", "pass", f"{kube.host} answers (Kubernetes {version.git_version})"
            )
        )
    except Exception as error:
        status = getattr(error, "status", 0) or 0
        if status in (401,):
            return [
                *checks,
                Check(
                    "Kubernetes API",
                    "fail",
                    f"{kube.host} refused the credentials (401)",
                    "refresh them: " + connect_fix,
                ),
            ]
        if not status:
            translated = kube.translate(error, "read /version")
            return [
                *checks,
                Check(
                    "Kubernetes API",
                    "fail",
                    translated.message,
                    "check network access to the API endpoint (a private EKS endpoint needs this VPC)",
                ),
            ]
        checks.append(
            Check("Kubernetes API", "pass", f"{kube.host} answers (HTTP {status} on /version)")
        )
    namespace = orchestrator.namespace
    for kind, (group, version_name, plural, _) in JOB_KINDS.items():
        checks.append(
            _crd_check(
                kube,
                k8s,
                kind,
                group,
                version_name,
                plural,
                namespace,
                required=kind == orchestrator.job_kind,
            )
        )
    checks.append(_pvc_check(kube, k8s, orchestrator.pvc_name, namespace))
    return checks


def _crd_check(
    kube: Any,
    k8s: Any,
    kind: str,
    group: str,
    version: str,
    plural: str,
    namespace: str,
    *,
    required: bool,
) -> Check:
    name = f"job kind {kind}"
    timeout = (CONNECT_TIMEOUT, HTTP_TIMEOUT)
    install = (
        "install the Kubeflow training operator (kubectl apply -k ...training-operator)"
        if group == "kubeflow.org"
        else "install the HyperPod training operator (EKS add-on)"
    )
    try:
        k8s.ApiextensionsV1Api(kube.api_client).read_custom_resource_definition(
            f"{plural}.{group}", _request_timeout=timeout
        )
        found: bool | None = True
    except Exception as error:
        status = getattr(error, "status", 0) or 0
        found = False if status == 404 else None
    if found is None:
        try:
            k8s.CustomObjectsApi(kube.api_client).list_namespaced_custom_object(
                group, version, namespace, plural, limit=1, _request_timeout=timeout
            )
            found = True
        except Exception as error:
            status = getattr(error, "status", 0) or 0
            if status == 404:
                found = False
            else:
                return Check(
                    name,
                    "fail" if required else "warn",
                    f"cannot tell whether {plural}.{group} is installed: {kube.translate(error, 'list ' + plural).message}",
                    "allow this user to list " + plural,
                )
    if found:
        return Check(
            name,
            "pass",
            f"{plural}.{group} installed" + (" (the default kind)" if required else ""),
        )
    if required:
        return Check(
            name,
            "fail",
            f"{plural}.{group} is not installed",
            install + " or set c.KubernetesOrchestrator.job_kind",
        )
    return Check(
        name, "skip", f"{plural}.{group} not installed (only needed when a job asks for {kind})"
    )


def _pvc_check(kube: Any, k8s: Any, pvc_name: str, namespace: str) -> Check:
    name = "FSx claim"
    fix = (
        f"create the PersistentVolumeClaim {pvc_name} in namespace {namespace} (FSx CSI driver) "
        "or set c.KubernetesOrchestrator.pvc_name"
    )
    try:
        claim = k8s.CoreV1Api(kube.api_client).read_namespaced_persistent_volume_claim(
            pvc_name, namespace, _request_timeout=(CONNECT_TIMEOUT, HTTP_TIMEOUT)
        )
    except Exception as error:
        status = getattr(error, "status", 0) or 0
        if status == 404:
            return Check(
                name, "fail", f"no PersistentVolumeClaim {pvc_name} in namespace {namespace}", fix
            )
        return Check(name, "fail", kube.translate(error, f"read the claim {pvc_name}").message, fix)
    phase = getattr(getattr(claim, "status", None), "phase", None) or "unknown"
    if phase != "Bound":
        return Check(
            name,
            "warn",
            f"{namespace}/{pvc_name} is {phase}",
            "check its PersistentVolume and the FSx CSI driver",
        )
    return Check(name, "pass", f"{namespace}/{pvc_name} is Bound")


# -- AWS and MLflow ----------------------------------------------------------------------------------


def aws_checks(kind: str, settings: Any) -> list[Check]:
    needed = kind == "kubernetes"
    miss: Status = "fail" if needed else "warn"
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        return [
            Check(
                "AWS credentials",
                miss,
                "boto3 is not installed",
                "pip install 'jupyter-hyperpod[aws]'",
            )
        ]
    region_fix = "set AWS_REGION (or AWS_DEFAULT_REGION), or a region in ~/.aws/config"
    try:
        aws = boto3.Session()
        credentials = aws.get_credentials()
    except Exception as error:
        return [
            Check(
                "AWS credentials",
                miss,
                f"cannot load the AWS configuration: {error}",
                "fix ~/.aws/config or AWS_PROFILE",
            )
        ]
    checks: list[Check] = []
    region = aws.region_name
    checks.append(
        Check("AWS region", "pass", region)
        if region
        else Check("AWS region", miss, "no region configured", region_fix)
    )
    if credentials is None:
        checks.append(
            Check(
                "AWS credentials",
                miss,
                "no credentials found",
                "attach a role (Studio execution role / instance profile) or set AWS_PROFILE",
            )
        )
        return checks
    try:
        sts = aws.client(
            "sts",
            region_name=region or "us-east-1",
            config=Config(
                connect_timeout=CONNECT_TIMEOUT,
                read_timeout=HTTP_TIMEOUT,
                retries={"max_attempts": 1},
            ),
        )
        identity = sts.get_caller_identity()
        checks.append(
            Check("AWS credentials", "pass", f"{identity.get('Arn')} ({credentials.method})")
        )
    except Exception as error:
        checks.append(
            Check(
                "AWS credentials",
                miss,
                f"{credentials.method} credentials do not work: {error}",
                "refresh them (aws sso login / new keys) or fix the role",
            )
        )
    return checks


def check_mlflow(uri: str) -> Check:
    name = "MLflow"
    has_mlflow = importlib.util.find_spec("mlflow") is not None
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///") :])
        directory = path.parent
        while not directory.exists() and directory != directory.parent:
            directory = directory.parent
        problem = _writable(directory)
        if problem:
            return Check(
                name,
                "fail",
                f"{uri}: cannot write {directory}: {problem}",
                "set c.HyperPodSettings.mlflow_tracking_uri to a writable sqlite file or a server",
            )
        if not has_mlflow:
            return Check(
                name,
                "warn",
                f"{uri}; the mlflow package is not installed here (no metrics in the panel)",
                "pip install 'jupyter-hyperpod[mlflow]'",
            )
        return Check(name, "pass", f"{uri} (writable)")
    if uri.startswith(("http://", "https://")):
        health = uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(health, timeout=HTTP_TIMEOUT) as response:
                code = response.status
        except urllib.error.HTTPError as error:
            code = error.code
        except (urllib.error.URLError, OSError) as error:
            return Check(
                name,
                "fail",
                f"{uri} unreachable: {getattr(error, 'reason', error)}",
                "start the tracking server or fix c.HyperPodSettings.mlflow_tracking_uri",
            )
        if code >= 400:
            return Check(
                name,
                "fail",
                f"{health} answered HTTP {code}",
                "check the tracking server (and its auth)",
            )
        return Check(name, "pass", f"{uri} answers")
    if uri.startswith("arn:aws"):
        if importlib.util.find_spec("sagemaker_mlflow") is None:
            return Check(
                name,
                "fail",
                f"{uri} is a SageMaker MLflow ARN but sagemaker-mlflow is not installed",
                "pip install sagemaker-mlflow",
            )
        return Check(name, "pass", f"{uri} (SageMaker managed MLflow; the plugin is installed)")
    return Check(name, "warn", f"{uri}: not checked (unknown scheme)", "")


def check_gpu_metrics(settings: Any, kind: str) -> Check:
    """The GPU metrics endpoint answers PromQL and has DCGM series (or the local GPUs read)."""
    from .gpu.reader import check_gpu

    status, detail, fix = check_gpu(settings, kind)
    return Check("GPU metrics", status, detail, fix)  # type: ignore[arg-type]


# -- the whole report --------------------------------------------------------------------------------


def diagnose(
    settings: Any,
    *,
    kind: str | None = None,
    partition: str | None = None,
    mlflow_uri: str | None = None,
    where: str = "this machine",
    server: list[Check] | None = None,
) -> DoctorReport:
    from .backends import detect_orchestrator

    checks: list[Check] = list(server or [])
    configured = settings.orchestrator
    if kind is None:
        kind = detect_orchestrator() if configured == "auto" else configured
    how = "configured" if configured == kind else f"'{configured}' picked"
    checks.append(Check("orchestrator", "pass", f"{kind} ({how})"))
    checks.extend(_guard("shared file system", lambda: check_shared_fs(settings, kind)))
    checks.extend(_guard("partition", lambda: check_partition(settings, partition)))
    checks.extend(_guard("job history", lambda: check_job_store(settings)))
    if kind == "slurm":
        checks.extend(_guard("Slurm", lambda: slurm_checks(settings)))
    elif kind == "kubernetes":
        checks.extend(_guard("Kubernetes", lambda: kubernetes_checks(settings)))
    if kind == "local":
        checks.append(Check("AWS", "skip", "not needed for the local cluster"))
    else:
        checks.extend(_guard("AWS", lambda: aws_checks(kind, settings)))
    uri = mlflow_uri or settings.mlflow_tracking_uri or _default_mlflow(settings, partition)
    checks.extend(_guard("MLflow", lambda: check_mlflow(uri)))
    checks.extend(_guard("GPU metrics", lambda: check_gpu_metrics(settings, kind)))
    return DoctorReport(checks, kind, where)


def _default_mlflow(settings: Any, partition: str | None) -> str:
    from .files import partition_dir

    root = (
        Path(partition)
        if partition
        else partition_dir(
            Path(settings.shared_fs_root).expanduser(), settings.partition, settings.user
        )
    )
    return f"sqlite:///{root}/.hyperpod/mlflow.db"


def run_doctor(args: argparse.Namespace, session: Any) -> Any:
    """The doctor verb: checks this machine; through a server, also that the server answers."""
    from .commands import ClientSession, Outcome, load_settings, server_session

    settings = load_settings()
    server_checks: list[Check] = []
    kind = partition = mlflow_uri = None
    where = "this machine, no Jupyter server"
    try:
        client_session = session if isinstance(session, ClientSession) else server_session(args)
    except HyperPodError as error:
        client_session = None
        server_checks.append(
            Check("Jupyter server", "fail", error.message, "pass --url/--token, or --direct")
        )
    if client_session is not None:
        where = client_session.description
        try:
            info = client_session.cluster()
            kind, partition, mlflow_uri = (
                info.orchestrator,
                info.filesystem.partition,
                info.mlflow_uri,
            )
            server_checks.append(
                Check(
                    "Jupyter server",
                    "pass",
                    f"{client_session.client.url} serves the hyperpod API ({kind})",
                )
            )
        except HyperPodError as error:
            server_checks.append(
                Check(
                    "Jupyter server",
                    "fail",
                    error.message,
                    "start JupyterLab with the extension, pass --url/--token, or use --direct",
                )
            )
    elif not server_checks:
        server_checks.append(
            Check(
                "Jupyter server",
                "skip",
                "none used: the magics and CLI run the core in this process",
            )
        )
    report = diagnose(
        settings,
        kind=kind,
        partition=partition,
        mlflow_uri=mlflow_uri,
        where=where,
        server=server_checks,
    )
    return Outcome(report, 0 if report.ok else 1)
