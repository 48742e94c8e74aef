"""Which environment this is (Studio, a HyperPod Space, plain JupyterLab), on what evidence, and
what a Space gives without a kubeconfig: the in-cluster service account, the FSx claim's mount
and the partition. The files are the real formats (proc(5) mountinfo lines, the kubelet's service
account files), written to temporary paths the settings name."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.backends import detect_orchestrator
from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.diagnose import check_environment, check_identity
from jupyter_hyperpod.core.environment import detect, parse_mountinfo, paths_of
from jupyter_hyperpod.core.settings import HyperPodSettings

# proc(5)'s example line, and FSx for Lustre as the CSI driver mounts a claim with a subPath
# (source <ip>@tcp:/<mountname>, root the claim's directory), and one with a space escaped.
EXT3 = "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
LUSTRE = (
    "1204 1180 0:95 /Data-Scientist /fsx rw,relatime - lustre "
    "10.1.2.3@tcp:/abcdefgh rw,flock,lazystatfs"
)
SPACED = "50 35 0:40 / /mnt/my\\040disk rw - tmpfs tmpfs rw"


@pytest.fixture
def space(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A pod's service account files, its mounts, no Studio metadata, no kubeconfig."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("space-token")
    (account / "ca.crt").write_text("")
    (account / "namespace").write_text("hyperpod-ns-team-a\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("\n".join([EXT3, LUSTRE, SPACED]) + "\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.100.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("HYPERPOD_FS_ROOT", raising=False)
    return {
        "studio_metadata_path": str(tmp_path / "no-metadata.json"),
        "service_account_dir": str(account),
        "mountinfo_path": str(mountinfo),
    }


def test_mountinfo_lines() -> None:
    mounts = parse_mountinfo("\n".join([EXT3, LUSTRE, SPACED, "garbage"]))
    assert [(m.root, m.point, m.fstype) for m in mounts] == [
        ("/mnt1", "/mnt2", "ext3"),
        ("/Data-Scientist", "/fsx", "lustre"),
        ("/", "/mnt/my disk", "tmpfs"),
    ]
    assert mounts[1].source == "10.1.2.3@tcp:/abcdefgh"
    assert [m.device for m in mounts] == ["98:0", "0:95", "0:40"]


def test_a_space_without_a_kubeconfig(space: dict[str, Any]) -> None:
    settings = HyperPodSettings(orchestrator="auto", **space)
    found = detect(paths_of(settings))
    assert found.kind == "space" and found.service_account is not None
    assert found.service_account.namespace == "hyperpod-ns-team-a"
    assert (
        found.fsx is not None and found.fsx.point == "/fsx" and found.partition == "/Data-Scientist"
    )
    # What the defaults are made from: the claim's mount, the cluster, the Space's namespace.
    assert settings.shared_fs_root == "/fsx"
    assert detect_orchestrator(settings) == "kubernetes"
    backend = KubernetesOrchestrator(settings=settings)
    try:
        assert backend.namespace == "hyperpod-ns-team-a"
        assert backend.kube.in_cluster is not None
        assert backend.kube.in_cluster.token_file == f"{space['service_account_dir']}/token"
    finally:
        backend.close()
    # doctor says which environment and on what evidence.
    shown = check_environment(settings)
    assert shown.status == "pass" and shown.detail.startswith("HyperPod Space")
    assert "KUBERNETES_SERVICE_HOST=10.100.0.1" in shown.detail
    assert f"service account token in {space['service_account_dir']}" in shown.detail
    assert "namespace hyperpod-ns-team-a" in shown.detail
    assert "FSx for Lustre 10.1.2.3@tcp:/abcdefgh mounted at /fsx" in shown.detail
    assert "partition /Data-Scientist" in shown.detail


def test_studio_and_plain_jupyterlab(
    space: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metadata = tmp_path / "resource-metadata.json"
    metadata.write_text(json.dumps({"UserProfileName": "Data-Scientist", "DomainId": "d-1"}))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    studio = HyperPodSettings(**{**space, "studio_metadata_path": str(metadata)})
    shown = check_environment(studio)
    assert shown.detail.startswith("SageMaker Studio: ")
    assert f"{metadata} (UserProfileName Data-Scientist, DomainId d-1)" in shown.detail
    plain = HyperPodSettings(
        **{**space, "mountinfo_path": str(tmp_path / "none"), "studio_metadata_path": "/nope"}
    )
    found = detect(paths_of(plain))
    assert found.kind == "jupyterlab" and found.service_account is None and found.fsx is None
    assert check_environment(plain).detail.startswith("plain JupyterLab: no /nope")
    # A token without KUBERNETES_SERVICE_HOST is not a pod; two Lustre mounts: none picked.
    (tmp_path / "two").write_text(f"{LUSTRE}\n{LUSTRE.replace(' /fsx ', ' /fsx2 ')}\n")
    two = detect(paths_of(HyperPodSettings(**{**space, "mountinfo_path": str(tmp_path / "two")})))
    assert two.kind == "jupyterlab" and two.fsx is None
    assert "2 Lustre mounts (/fsx, /fsx2): none picked" in two.evidence


def test_doctor_says_who_the_user_is_to_each_system(tmp_path: Path) -> None:
    metadata = tmp_path / "resource-metadata.json"
    metadata.write_text(json.dumps({"UserProfileName": "Data-Scientist"}))
    me = pwd.getpwuid(os.getuid()).pw_name
    shown = check_identity(HyperPodSettings(studio_metadata_path=str(metadata)))
    assert shown.detail.startswith("user Data-Scientist (from the studio metadata")
    assert f"runs as {me} (uid {os.getuid()}" in shown.detail
    if os.getuid() == 0:  # root for a name this machine has no account for: fail closed
        assert shown.status == "warn" and "not a POSIX account here" in shown.detail
        assert "c.HyperPodSettings.user" in shown.fix
    plain = check_identity(HyperPodSettings(studio_metadata_path=str(tmp_path / "none")))
    assert plain.status == "pass" and plain.detail.startswith(f"user {me} (from the os user")
