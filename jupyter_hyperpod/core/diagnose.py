"""The login-node checks every orchestrator shares (the shared file system, the partition, the job
history, AWS, MLflow) and what a check is. Each backend adds its own (`Orchestrator.diagnose`);
`HyperPodService.diagnose` puts them together, where the core runs.

Each check says pass / warn / fail / skip, what it saw, and the fix in one line. Every probe has a
time limit, so a dead controller or API server makes a check fail quickly instead of hanging.
"""

from __future__ import annotations

import importlib.util
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .api import CheckStatus, DiagnosticCheck
from .environment import detect, paths_of
from .errors import HyperPodError
from .identity import identity_of
from .labcompat import check_jupyterlab

if TYPE_CHECKING:
    from .backend import JobPython


class BackendTraits(Protocol):
    """What the checks ask of the backend in use (`Orchestrator`'s class attributes)."""

    @property
    def jobs_run_here(self) -> bool: ...

    @property
    def needs_aws(self) -> bool: ...

    @property
    def job_python(self) -> JobPython: ...


Check = DiagnosticCheck
COMMAND_TIMEOUT = 10.0
CONNECT_TIMEOUT = 3.0
HTTP_TIMEOUT = 5.0


def check(name: str, status: CheckStatus, detail: str, fix: str = "") -> DiagnosticCheck:
    return DiagnosticCheck(name=name, status=status, detail=detail, fix=fix)


def guard(name: str, probe: Callable[[], Check | list[Check]]) -> list[Check]:
    """A check that crashes is a failed check, never a crashed diagnosis."""
    try:
        result = probe()
    except HyperPodError as error:
        return [check(name, "fail", error.message, "see the message")]
    except Exception as error:
        return [check(name, "fail", f"{type(error).__name__}: {error}", "see the message")]
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


def check_shared_fs(root: Path, *, jobs_run_here: bool) -> Check:
    fix_root = "set c.HyperPodSettings.shared_fs_root (or $HYPERPOD_FS_ROOT) to where the shared file system is mounted"
    if not root.exists():
        if jobs_run_here:
            return check(
                "shared file system",
                "warn",
                f"{root} does not exist yet; it is created on first use",
                "nothing to do for the local cluster",
            )
        return check(
            "shared file system",
            "fail",
            f"{root} does not exist (not mounted?)",
            f"mount the cluster's shared file system (FSx for Lustre) there, or {fix_root}",
        )
    if not root.is_dir():
        return check("shared file system", "fail", f"{root} is not a directory", fix_root)
    mount, fstype = _mount_of(root)
    problem = _writable(root)
    if problem:
        return check(
            "shared file system",
            "fail",
            f"{root} is not writable: {problem}",
            f"give this user write access to {root} (chown/chmod) or {fix_root}",
        )
    detail = f"{root} on {mount} ({fstype or 'unknown type'}), writable"
    if not jobs_run_here and mount == "/" and fstype not in ("lustre", "nfs", "nfs4"):
        return check(
            "shared file system",
            "warn",
            detail + "; it is on the root disk, not a shared mount",
            f"jobs on other nodes will not see these files: {fix_root}",
        )
    return check("shared file system", "pass", detail)


def check_partition(path: Path, mode: str, user: str) -> Check:
    mode = f"partition mode '{mode}', user {user}"
    if not path.exists():
        ancestor = path.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not _writable(ancestor):
            return check(
                "partition",
                "warn",
                f"{path} ({mode}) does not exist yet; it is created on first use",
            )
        return check(
            "partition",
            "fail",
            f"{path} ({mode}) does not exist",
            f"create it (mkdir -p {path}) or set c.HyperPodSettings.partition",
        )
    problem = _writable(path)
    if problem:
        return check(
            "partition",
            "fail",
            f"{path} is not writable: {problem}",
            f"give this user write access to {path}",
        )
    return check("partition", "pass", f"{path} ({mode}), writable")


def check_job_store(settings: Any) -> Check:
    store = Path(settings.job_store).expanduser()
    directory = store.parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    problem = _writable(directory)
    if problem:
        return check(
            "job history",
            "fail",
            f"cannot write {store}: {problem}",
            "set c.HyperPodSettings.job_store to a writable file",
        )
    return check("job history", "pass", f"{store}")


# -- AWS and MLflow ----------------------------------------------------------------------------------


def aws_checks(settings: Any, *, needed: bool) -> list[Check]:
    miss: CheckStatus = "fail" if needed else "warn"
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        return [
            check(
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
            check(
                "AWS credentials",
                miss,
                f"cannot load the AWS configuration: {error}",
                "fix ~/.aws/config or AWS_PROFILE",
            )
        ]
    checks: list[Check] = []
    region = aws.region_name
    checks.append(
        check("AWS region", "pass", region)
        if region
        else check("AWS region", miss, "no region configured", region_fix)
    )
    if credentials is None:
        checks.append(
            check(
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
            check("AWS credentials", "pass", f"{identity.get('Arn')} ({credentials.method})")
        )
    except Exception as error:
        checks.append(
            check(
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
            return check(
                name,
                "fail",
                f"{uri}: cannot write {directory}: {problem}",
                "set c.HyperPodSettings.mlflow_tracking_uri to a writable sqlite file or a server",
            )
        if not has_mlflow:
            return check(
                name,
                "warn",
                f"{uri}; the mlflow package is not installed here (no metrics in the panel)",
                "pip install 'jupyter-hyperpod[mlflow]'",
            )
        return check(name, "pass", f"{uri} (writable)")
    if uri.startswith(("http://", "https://")):
        health = uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(health, timeout=HTTP_TIMEOUT) as response:
                code = response.status
        except urllib.error.HTTPError as error:
            code = error.code
        except (urllib.error.URLError, OSError) as error:
            return check(
                name,
                "fail",
                f"{uri} unreachable: {getattr(error, 'reason', error)}",
                "start the tracking server or fix c.HyperPodSettings.mlflow_tracking_uri",
            )
        if code >= 400:
            return check(
                name,
                "fail",
                f"{health} answered HTTP {code}",
                "check the tracking server (and its auth)",
            )
        return check(name, "pass", f"{uri} answers")
    if uri.startswith("arn:aws"):
        if importlib.util.find_spec("sagemaker_mlflow") is None:
            return check(
                name,
                "fail",
                f"{uri} is a SageMaker MLflow ARN but sagemaker-mlflow is not installed",
                "pip install sagemaker-mlflow",
            )
        return check(name, "pass", f"{uri} (SageMaker managed MLflow; the plugin is installed)")
    return check(name, "warn", f"{uri}: not checked (unknown scheme)", "")


# -- the jobs' interpreter ---------------------------------------------------------------------------

# What the training templates run: `<python> -m jupyter_hyperpod.training` needs these importable.
_TRAINING_PROBE = (
    "import importlib.util as u, sys; "
    "missing = [m for m in ('jupyter_hyperpod.training', 'torch', 'transformers', 'peft') "
    "if u.find_spec(m) is None]; print(' '.join(missing)); sys.exit(3 if missing else 0)"
)


def check_job_python(settings: Any, where: JobPython) -> Check:
    """The interpreter the templates' jobs run with exists and has the training module.

    Local jobs use the server's own interpreter; Slurm jobs `cluster_python`, checked on this login
    node (HyperPod's Slurm nodes share its software; `srun` from Studio does not work); on
    Kubernetes it lives in the image, which only a pod can check."""
    import shutil
    import subprocess
    import sys

    name = "job interpreter"
    if where == "image":
        python = settings.cluster_python
        return check(
            name,
            "skip",
            f"jobs run `{python}` inside their image (not checkable from here)",
            f"kubectl run hyperpod-check --rm -it --restart=Never --image=<image> -- {python} "
            "-c 'import jupyter_hyperpod.training'",
        )
    here = where == "server"
    python = sys.executable if here else settings.cluster_python
    setting = "the server's interpreter" if here else "c.HyperPodSettings.cluster_python"
    found = shutil.which(python)
    if not found:
        return check(
            name,
            "fail",
            f"{python} ({setting}) is not found",
            "set c.HyperPodSettings.cluster_python to the Python of the cluster's nodes",
        )
    try:
        probe = subprocess.run(
            [found, "-c", _TRAINING_PROBE],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return check(name, "warn", f"{found} did not answer in {COMMAND_TIMEOUT:.0f} s", "")
    if probe.returncode != 0:
        missing = probe.stdout.strip() or probe.stderr.strip()[-200:]
        return check(
            name,
            "warn",
            f"{found} ({setting}) runs scripts, but the training templates need: {missing}",
            f"{found} -m pip install 'jupyter-hyperpod[training]'",
        )
    return check(name, "pass", f"{found} ({setting}) has jupyter_hyperpod.training and torch")


def check_environment(settings: Any) -> Check:
    """Which environment this is (Studio, a HyperPod Space, plain JupyterLab) and on what
    evidence: the same facts the defaults are made from (`core/environment.py`)."""
    found = detect(paths_of(settings))
    detail = f"{found.title}: " + "; ".join(found.evidence)
    if found.kind == "space" and found.partition:
        detail += f"; partition {found.partition} of the file system"
    return check("environment", "pass", detail)


def check_identity(settings: Any) -> Check:
    """Who the user is to each system (`core/identity.py`): the display name, the uid Slurm and
    the OS see, whose permissions decide others' logs (a warning when nobody's: fail closed)."""
    me = identity_of(settings)
    detail = (
        f"user {me.name} (from the {me.source}: display name, partition, Kubernetes label); "
        f"runs as {me.login} (uid {me.uid}: what Slurm and the OS see)"
    )
    if me.reader is None:
        return check(
            "identity",
            "warn",
            f"{detail}; others' logs are refused: {me.name} is not a POSIX account here",
            "set c.HyperPodSettings.user to your POSIX user name, or run the server as that user",
        )
    if me.reader.uid != me.uid:
        detail += f"; others' logs are shown where {me.reader.name} may read them"
    return check("identity", "pass", detail)


# -- the whole diagnosis -----------------------------------------------------------------------------


def login_node_checks(
    settings: Any,
    *,
    kind: str,
    traits: BackendTraits,
    fs_root: Path,
    partition: Path,
    mlflow_uri: str,
    backend: Callable[[], list[Check]],
    extra: Sequence[tuple[str, Callable[[], Check | list[Check]]]] = (),
) -> list[Check]:
    """The checks in order: what the core uses (the same words as `GET cluster`: orchestrator,
    file system root, partition), then the backend's own, AWS, MLflow and the extra ones (the
    GPU metrics: given by the service, which knows that adapter; this module imports none)."""
    configured = settings.orchestrator
    how = "configured" if configured == kind else f"'{configured}' picked"
    checks = guard("environment", lambda: check_environment(settings))
    checks.extend(guard("identity", lambda: check_identity(settings)))
    checks.append(check("orchestrator", "pass", f"{kind} ({how})"))
    checks.extend(
        guard(
            "shared file system",
            lambda: check_shared_fs(fs_root, jobs_run_here=traits.jobs_run_here),
        )
    )
    checks.extend(
        guard("partition", lambda: check_partition(partition, settings.partition, settings.user))
    )
    checks.extend(guard("job history", lambda: check_job_store(settings)))
    checks.extend(guard(kind, backend))
    checks.extend(guard("job interpreter", lambda: check_job_python(settings, traits.job_python)))
    checks.extend(guard("JupyterLab", check_jupyterlab))
    if traits.jobs_run_here:
        checks.append(check("AWS", "skip", f"not needed for the {kind} cluster"))
    else:
        checks.extend(guard("AWS", lambda: aws_checks(settings, needed=traits.needs_aws)))
    checks.extend(guard("MLflow", lambda: check_mlflow(mlflow_uri)))
    for name, probe in extra:
        checks.extend(guard(name, probe))
    return checks
