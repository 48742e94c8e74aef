"""The doctor's checks: Kubernetes against the emulated API server (tests/kubernetes/emulator.py),
Slurm with stand-in client commands (sinfo, scontrol, munge...) and a listening "slurmctld" port."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.doctor import DoctorReport, diagnose

pytestmark = pytest.mark.timeout(60)

CRD = "apiextensions.k8s.io/v1/customresourcedefinitions"
PVC = "v1/persistentvolumeclaims"


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))


def settings(tmp_path: Path, fs_root: Path, kind: str, **backend: Any) -> HyperPodSettings:
    config = Config()
    config.HyperPodSettings.orchestrator = kind
    config.HyperPodSettings.shared_fs_root = str(fs_root)
    config.HyperPodSettings.job_store = str(tmp_path / "jobs.sqlite")
    section = "KubernetesOrchestrator" if kind == "kubernetes" else "SlurmOrchestrator"
    for key, value in backend.items():
        setattr(config[section], key, value)
    return HyperPodSettings(config=config)


def statuses(report: DoctorReport) -> dict[str, str]:
    return {check.name: check.status for check in report.checks}


# -- Kubernetes ------------------------------------------------------------------------------------------


@pytest.fixture
def k8s(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    from tests.kubernetes.emulator import EmulatorThread

    emulator = EmulatorThread()
    emulator.start()
    assert emulator.emulator is not None
    emulator.emulator.resources[CRD] = {}
    emulator.emulator.resources[PVC] = {}
    kubeconfig = emulator.write_kubeconfig(tmp_path / "kubeconfig")
    yield emulator, kubeconfig
    emulator.stop()


def crd(plural: str, group: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": plural, "kind": kind},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True}],
        },
    }


def test_kubernetes_checks_against_the_api(
    k8s: tuple[Any, Path], tmp_path: Path, fs_root: Path, partition: Path, no_aws: None
) -> None:
    emulator, kubeconfig = k8s
    emulator.put(CRD, crd("pytorchjobs", "kubeflow.org", "PyTorchJob"))
    configured = settings(tmp_path, fs_root, "kubernetes", kubeconfig=str(kubeconfig))

    report = diagnose(configured)
    seen = statuses(report)
    assert seen["kubeconfig context"] == "pass"
    assert (
        seen["Kubernetes API"] == "pass"
        and "v1.31.0-eks-emulated" in report["Kubernetes API"].detail
    )
    assert seen["job kind PyTorchJob"] == "pass"
    assert seen["job kind HyperPodPyTorchJob"] == "skip"
    assert seen[
        "FSx claim"
    ] == "fail" and "no PersistentVolumeClaim fsx-claim in namespace default" in (
        report["FSx claim"].detail
    )
    assert seen["AWS credentials"] == "fail" and seen["AWS region"] == "fail"  # EKS needs AWS
    # In this process no read had started the watch cache: doctor starts it and waits for it.
    assert seen["watch cache"] == "pass", report["watch cache"].detail
    assert not report.ok

    emulator.put(
        PVC,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "fsx-claim", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteMany"]},
            "status": {"phase": "Bound"},
        },
    )
    assert statuses(diagnose(configured))["FSx claim"] == "pass"

    hyperpod_kind = settings(
        tmp_path, fs_root, "kubernetes", kubeconfig=str(kubeconfig), job_kind="HyperPodPyTorchJob"
    )
    check = diagnose(hyperpod_kind)["job kind HyperPodPyTorchJob"]
    assert check.status == "fail" and "HyperPod training operator" in check.fix

    emulator.stop_server()
    down = diagnose(configured)["Kubernetes API"]
    assert down.status == "fail" and "unreachable" in down.detail


def test_kubernetes_without_a_kubeconfig(
    tmp_path: Path, fs_root: Path, no_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    report = diagnose(
        settings(tmp_path, fs_root, "kubernetes", kubeconfig=str(tmp_path / "missing"))
    )
    check = report["kubeconfig context"]
    assert check.status == "fail" and "jupyter hyperpod connect CLUSTER" in check.fix


# -- Slurm -----------------------------------------------------------------------------------------------


def write_tool(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def slurm_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, int]]:
    """Stand-ins for Slurm's clients and munge, and a listening socket as slurmctld."""
    directory = tmp_path / "slurm-bin"
    directory.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    for name in ("sbatch", "squeue", "scancel"):
        write_tool(directory, name, "exit 0")
    write_tool(
        directory,
        "scontrol",
        f'echo "SlurmctldHost[0]   = head(127.0.0.1)"; echo "SlurmctldPort = {port}"; '
        'echo "ClusterName = ml-cluster"',
    )
    write_tool(directory, "sinfo", 'echo "dev up"; echo "gpu* up"')
    write_tool(directory, "munge", "echo credential")
    write_tool(directory, "unmunge", 'read line; [ "$line" = credential ]')
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    yield directory, port
    listener.close()


def test_slurm_checks(
    slurm_bin: tuple[Path, int], tmp_path: Path, fs_root: Path, partition: Path, no_aws: None
) -> None:
    directory, port = slurm_bin
    report = diagnose(settings(tmp_path, fs_root, "slurm", bin_dir=str(directory)))
    seen = statuses(report)
    assert seen["Slurm commands"] == "pass" and seen["munge"] == "pass"
    assert (
        seen["Slurm controller"] == "pass"
        and f"127.0.0.1:{port}" in report["Slurm controller"].detail
    )
    assert report["Slurm partition"].detail == "jobs go to 'gpu'"
    assert seen["AWS credentials"] == "warn"  # optional for Slurm

    wrong = diagnose(settings(tmp_path, fs_root, "slurm", bin_dir=str(directory), partition="big"))
    assert (
        wrong["Slurm partition"].status == "fail"
        and "'big' not in dev, gpu" in wrong["Slurm partition"].detail
    )

    write_tool(directory, "unmunge", 'echo "unmunge: Error: Invalid credential" >&2; exit 1')
    assert (
        diagnose(settings(tmp_path, fs_root, "slurm", bin_dir=str(directory)))["munge"].status
        == "fail"
    )

    (directory / "sbatch").unlink()
    missing = diagnose(settings(tmp_path, fs_root, "slurm", bin_dir=str(directory)))
    assert (
        missing["Slurm commands"].status == "fail"
        and missing["Slurm commands"].detail == "not found: sbatch"
    )


def test_slurm_controller_down(
    slurm_bin: tuple[Path, int], tmp_path: Path, fs_root: Path, no_aws: None
) -> None:
    directory, _ = slurm_bin
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead_port = closed.getsockname()[1]
    closed.close()
    write_tool(
        directory,
        "scontrol",
        f'echo "SlurmctldHost[0] = head(127.0.0.1)"; echo "SlurmctldPort = {dead_port}"',
    )

    check = diagnose(settings(tmp_path, fs_root, "slurm", bin_dir=str(directory)))[
        "Slurm controller"
    ]

    assert check.status == "fail" and f"cannot connect to 127.0.0.1:{dead_port}" in check.detail
    assert "start slurmctld" in check.fix


def test_mlflow_server_unreachable(tmp_path: Path, fs_root: Path) -> None:
    config = settings(tmp_path, fs_root, "local")
    config.mlflow_tracking_uri = "http://127.0.0.1:9"
    check = diagnose(config)["MLflow"]
    assert check.status == "fail" and "unreachable" in check.detail
