"""Fixtures: the Kubernetes emulator on 127.0.0.1 (one per session), the test controller that runs
PyTorchJobs in it, a kubeconfig pointing at it, and the backend under test."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config as k8s_config
from traitlets.config import Config

from jupyter_hyperpod.backends.kubernetes import backend as backend_module
from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.backends.kubernetes.manifest import build_manifest
from jupyter_hyperpod.core.backend import Launch, StoredJob
from jupyter_hyperpod.core.models import JobSpec, JobState
from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.core.state import BackendState

from . import official
from .controller import Controller, validate_pytorchjob
from .emulator import EmulatorThread

WORKLOAD = Path(__file__).parent / "workloads" / "steps.py"

NODES = 4
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312"


def node_object(
    index: int,
    *,
    gpus: int = 8,
    health: str = "Schedulable",
    deep: str | None = "Passed",
    ready: bool = True,
    group: str = "worker-group-1",
    trainium: bool = False,
) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": f"hyperpod-i-{index:05d}",
        "node.kubernetes.io/instance-type": "ml.trn1.32xlarge" if trainium else "ml.p5.48xlarge",
        "sagemaker.amazonaws.com/instance-group-name": group,
        "sagemaker.amazonaws.com/node-health-status": health,
        "topology.kubernetes.io/zone": "us-east-1a",
    }
    if deep:
        labels["sagemaker.amazonaws.com/deep-health-check-status"] = deep
    accelerator = "aws.amazon.com/neurondevice" if trainium else "nvidia.com/gpu"
    resources = {
        "cpu": "191450m",
        "memory": "2097152Mi",
        accelerator: str(gpus),
        "vpc.amazonaws.com/efa": "32",
        "pods": "110",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"hyperpod-i-{index:05d}", "labels": labels},
        "spec": {},
        "status": {
            "allocatable": resources,
            "capacity": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "kubelet is posting ready status"
                    if ready
                    else "container runtime is down",
                }
            ],
        },
    }


@pytest.fixture(scope="package")
def k8s() -> Iterator[EmulatorThread]:
    emulator = EmulatorThread()
    emulator.start()
    for index in range(NODES):
        emulator.put("v1/nodes", node_object(index))
    yield emulator
    emulator.stop()


@pytest.fixture(scope="package")
def kubeconfig(k8s: EmulatorThread, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return k8s.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")


@pytest.fixture(scope="package")
def controller(k8s: EmulatorThread, kubeconfig: Path) -> Iterator[Controller]:
    assert k8s.emulator is not None
    # What the API server does with a create: the CRD's schema (here the maintained models of
    # each API, official.py), then the training operator's validating webhook (v1.8+).
    k8s.emulator.admission["pytorchjobs"] = lambda job: (
        official.refusal(job) or validate_pytorchjob(job)
    )
    k8s.emulator.admission["hyperpodpytorchjobs"] = official.refusal
    api = k8s_config.new_client_from_config(str(kubeconfig))
    ctl = Controller(api, k8s.emulator.logs, [f"hyperpod-i-{i:05d}" for i in range(NODES)])
    ctl.start()
    yield ctl
    ctl.stop()
    api.close()


def program_lines(text: str, rank: int, world: int) -> list[str]:
    """The program's own lines in a rank's log. The pod's log also holds what its launcher
    prints: torchrun's agent logs "Error waiting on exit barrier" with a traceback when the
    agent that holds the store ended first (torch/distributed/elastic/agent/server/api.py,
    `_exit_barrier`), a race between the pods that the real operators have too."""
    return [line for line in text.splitlines() if line.startswith(f"rank {rank}/{world} ")]


def warning_event(
    namespace: str, name: str, about: str, reason: str, kind: str = "Pod"
) -> dict[str, Any]:
    """A core/v1 Warning event about the object `about`, as the scheduler or the kubelet
    records it (its message names the event)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": kind, "name": about, "namespace": namespace},
        "reason": reason,
        "message": f"{reason} ({name})",
        "type": "Warning",
        "count": 1,
        "lastTimestamp": "2026-12-06T07:00:00Z",
    }


def make_settings(fs_root: Path, kubeconfig: Path, **traits: Any) -> HyperPodSettings:
    config = Config()
    config.HyperPodSettings.shared_fs_root = str(fs_root)
    config.HyperPodSettings.user = "Data-Scientist"
    config.KubernetesOrchestrator.kubeconfig = str(kubeconfig)
    config.KubernetesOrchestrator.image = IMAGE
    config.KubernetesOrchestrator.service_account = "eks-hyperpod-sa"
    config.KubernetesOrchestrator.allowed_namespaces = [
        "default",
        "team-a",
        "hyperpod-ns-team-a",
        "kubeflow",
    ]
    config.KubernetesOrchestrator.node_cache_seconds = 0.0
    for key, value in traits.items():
        setattr(config.KubernetesOrchestrator, key, value)
    return HyperPodSettings(config=config)


@pytest.fixture(autouse=True)
def official_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every manifest the backend renders in these tests (previews and submits) is checked with
    the maintained models of its API."""

    def checked(launch: Launch, options: Any) -> dict[str, Any]:
        manifest = build_manifest(launch, options)
        official.check_manifest(manifest)
        return manifest

    monkeypatch.setattr(backend_module, "build_manifest", checked)


@pytest.fixture
def hyperpod_config(fs_root: Path, tmp_path: Path, partition: Path) -> dict[str, Any]:
    """The HyperPodApp traits of the REST tests here (test_rest.py, test_cache.py): the
    Kubernetes backend, refreshing often."""
    return {
        "orchestrator": "kubernetes",
        "shared_fs_root": str(fs_root),
        "partition": "shared",
        "user": "alice",
        "job_store": str(tmp_path / "jobs.sqlite"),
        "refresh_interval": 0.2,
    }


@pytest.fixture
def fs_root(tmp_path: Path) -> Path:
    root = tmp_path / "fsx"
    (root / "Data-Scientist" / "scripts").mkdir(parents=True)
    # The program jobs run by default (make_launch), where the pods see it: /data/...
    shutil.copy(WORKLOAD, root / "Data-Scientist" / "scripts" / "train.py")
    return root


@pytest.fixture
def backend(
    fs_root: Path, kubeconfig: Path, controller: Controller
) -> Iterator[KubernetesOrchestrator]:
    # The FSx claim of the pods is this test's shared file system root.
    controller.kubelet.claims["fsx-claim"] = str(fs_root)
    orchestrator = KubernetesOrchestrator(settings=make_settings(fs_root, kubeconfig))
    yield orchestrator
    orchestrator.close()
    # Pods share this machine's network: end every job's processes before the next test.
    controller.end_all_jobs()


def make_launch(fs_root: Path, name: str = "finetune", **fields: Any) -> Launch:
    fields.setdefault(
        "command",
        ["/data/Data-Scientist/scripts/train.py", "--config", "/data/Data-Scientist/args.yaml"],
    )
    spec = JobSpec(name=name, **fields)
    job_id = f"{name}-{uuid.uuid4().hex[:6]}"
    job_dir_local = fs_root / "Data-Scientist" / ".hyperpod" / "jobs" / job_id
    job_dir_local.mkdir(parents=True)
    return Launch(
        job_id=job_id,
        spec=spec,
        user="Data-Scientist",
        command=list(spec.command),
        workdir="/data/Data-Scientist",
        job_dir=f"/data/Data-Scientist/.hyperpod/jobs/{job_id}",
        job_dir_local=job_dir_local,
        env={
            **spec.env,
            "HYPERPOD_JOB_ID": job_id,
            "HYPERPOD_JOB_DIR": f"/data/Data-Scientist/.hyperpod/jobs/{job_id}",
        },
    )


def stored(launch: Launch, update: Any) -> StoredJob:
    return StoredJob(
        id=launch.job_id,
        spec=launch.spec,
        state=update.state,
        backend_id=update.backend_id,
        created=time.time(),
        started=None,
        # What the store keeps of a JobUpdate's data: a typed partial state's own facts.
        data=update.data.changes()
        if isinstance(update.data, BackendState)
        else dict(update.data or {}),
    )


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")


def wait_state(
    backend: KubernetesOrchestrator, job: StoredJob, *states: JobState, timeout: float = 60.0
) -> Any:
    seen: list[Any] = []

    def check() -> Any:
        update = backend.refresh([job])[job.id]
        seen[:] = [update]
        return update if update.state in states else None

    try:
        return wait_for(check, timeout)
    except AssertionError:
        raise AssertionError(f"job {job.id} never reached {states}; last: {seen}") from None
