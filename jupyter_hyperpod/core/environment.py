"""Where this JupyterLab runs, and on what evidence: a SageMaker Studio space, a HyperPod Space
(JupyterLab as a pod on the EKS cluster) or a plain JupyterLab. Every path is injectable
(`EnvironmentPaths`), so tests point it at temporary files.

The facts read, with where they are documented:
- Studio: `/opt/ml/metadata/resource-metadata.json` (`UserProfileName`, `DomainId`, `SpaceName`).
- A pod: the kubelet sets `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT` in every container
  and mounts the service account's `token`, `ca.crt` and `namespace` under
  `/var/run/secrets/kubernetes.io/serviceaccount` (Kubernetes "Accessing the Kubernetes API from
  a Pod"); the kubernetes client's `load_incluster_config` reads exactly these.
- The FSx claim's mount: `/proc/self/mountinfo` (proc(5): mount id, parent id, major:minor,
  root, mount point, options, optional fields, `-`, fstype, source, super options). FSx for
  Lustre mounts with fstype `lustre`, source `<ip>@tcp:/<mountname>`; `root` is the directory of
  the file system the mount shows (a claim mounted with `subPath: Data-Scientist`: `/Data-Scientist`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

STUDIO_METADATA = "/opt/ml/metadata/resource-metadata.json"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MOUNTINFO = "/proc/self/mountinfo"
LUSTRE = "lustre"


@dataclass(frozen=True)
class EnvironmentPaths:
    studio_metadata: str = STUDIO_METADATA
    service_account_dir: str = SERVICE_ACCOUNT_DIR
    mountinfo: str = MOUNTINFO


@dataclass(frozen=True)
class Mount:
    root: str
    """The directory of the mounted file system shown at `point` ('/' for all of it)."""
    point: str
    fstype: str
    source: str
    device: str = ""
    """The file system's device as 'major:minor' (what `os.stat().st_dev` names)."""


@dataclass(frozen=True)
class ServiceAccount:
    """The pod's in-cluster credentials (no kubeconfig): the API server and its namespace."""

    host: str
    port: str
    directory: str
    namespace: str | None

    @property
    def token_file(self) -> str:
        return os.path.join(self.directory, "token")

    @property
    def ca_file(self) -> str:
        return os.path.join(self.directory, "ca.crt")


@dataclass
class Environment:
    kind: Literal["studio", "space", "jupyterlab"]
    evidence: list[str] = field(default_factory=list)
    service_account: ServiceAccount | None = None
    fsx: Mount | None = None
    """The one FSx for Lustre mount (None when there is none, or several)."""
    partition: str | None = None
    """The directory of the file system this mount shows: the partition ('/' all of it)."""

    @property
    def title(self) -> str:
        return {
            "studio": "SageMaker Studio",
            "space": "HyperPod Space (a pod on the EKS cluster)",
            "jupyterlab": "plain JupyterLab",
        }[self.kind]


def paths_of(settings: Any) -> EnvironmentPaths:
    """The paths the settings name (`studio_metadata_path`, `service_account_dir`,
    `mountinfo_path`), defaults for those they do not have."""
    return EnvironmentPaths(
        studio_metadata=str(getattr(settings, "studio_metadata_path", "") or STUDIO_METADATA),
        service_account_dir=str(
            getattr(settings, "service_account_dir", "") or SERVICE_ACCOUNT_DIR
        ),
        mountinfo=str(getattr(settings, "mountinfo_path", "") or MOUNTINFO),
    )


def _unescape(text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040...)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text


def parse_mountinfo(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 2:
            continue
        mounts.append(
            Mount(
                root=_unescape(fields[3]),
                point=_unescape(fields[4]),
                fstype=rest[0],
                source=rest[1],
                device=fields[2],
            )
        )
    return mounts


def lustre_mounts(paths: EnvironmentPaths) -> list[Mount]:
    try:
        text = Path(paths.mountinfo).read_text(encoding="utf-8")
    except OSError:
        return []
    return [m for m in parse_mountinfo(text) if m.fstype == LUSTRE]


def service_account(
    paths: EnvironmentPaths, environ: Mapping[str, str] | None = None
) -> ServiceAccount | None:
    """The in-cluster service account, when this process runs in a pod (host and token both)."""
    env = os.environ if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    directory = paths.service_account_dir
    if not host or not os.path.isfile(os.path.join(directory, "token")):
        return None
    try:
        namespace = Path(directory, "namespace").read_text(encoding="utf-8").strip() or None
    except OSError:
        namespace = None
    return ServiceAccount(
        host=host,
        port=env.get("KUBERNETES_SERVICE_PORT", "443"),
        directory=directory,
        namespace=namespace,
    )


def _studio(path: str) -> dict[str, str] | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def detect(
    paths: EnvironmentPaths | None = None, environ: Mapping[str, str] | None = None
) -> Environment:
    """Studio when its metadata file is there, a Space when this is a pod with a service
    account, else plain JupyterLab; with the evidence for each fact found."""
    paths = paths or EnvironmentPaths()
    evidence: list[str] = []
    studio = _studio(paths.studio_metadata)
    account = service_account(paths, environ)
    kind: Literal["studio", "space", "jupyterlab"] = "jupyterlab"
    if studio is not None:
        kind = "studio"
        named = ", ".join(
            f"{key} {studio[key]}"
            for key in ("UserProfileName", "DomainId", "SpaceName")
            if studio.get(key)
        )
        evidence.append(f"{paths.studio_metadata} ({named or 'no profile named'})")
    if account is not None:
        kind = "space" if studio is None else kind
        evidence.append(
            f"KUBERNETES_SERVICE_HOST={account.host} and a service account token in "
            f"{account.directory}"
            + (f" (namespace {account.namespace})" if account.namespace else "")
        )
    found = lustre_mounts(paths)
    fsx = found[0] if len(found) == 1 else None
    if fsx is not None:
        evidence.append(
            f"FSx for Lustre {fsx.source} mounted at {fsx.point}"
            + (f" showing {fsx.root}" if fsx.root != "/" else "")
            + f" ({paths.mountinfo})"
        )
    elif found:
        evidence.append(
            f"{len(found)} Lustre mounts ({', '.join(m.point for m in found)}): none picked"
        )
    if not evidence:
        evidence.append(
            f"no {paths.studio_metadata}, no in-cluster service account "
            f"({paths.service_account_dir}), no Lustre mount"
        )
    return Environment(
        kind=kind,
        evidence=evidence,
        service_account=account,
        fsx=fsx,
        partition=fsx.root if fsx is not None else None,
    )


def studio_user_profile(metadata_path: str) -> str | None:
    """The Studio user profile name, or None outside Studio or in a shared space."""
    try:
        with open(metadata_path, encoding="utf-8") as handle:
            metadata = json.load(handle)
    except (OSError, ValueError):
        return None
    name = metadata.get("UserProfileName")
    return name if isinstance(name, str) and name else None
