"""The queue on the Kubernetes double with RBAC: jobs created from manifests written by hand (as
with `kubectl apply`), their status and pods written as the operators write them; only the
namespaces this user may list, others' logs only where pods/log is allowed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from traitlets.config import Config

from jupyter_hyperpod.core.errors import Forbidden
from jupyter_hyperpod.core.models import JobState
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings

from .k8s_rbac import RbacEmulatorThread

ME = "Data-Scientist"
JOBS = ("pytorchjobs", "hyperpodpytorchjobs")
KUBEFLOW = "kubeflow.org"
HYPERPOD = "sagemaker.amazonaws.com"
QUEUE = "hyperpod-ns-team-b-localqueue"

# Written by people, applied with kubectl: nothing here was rendered by the extension.
MANIFESTS = f"""
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: bert-ft
  namespace: team-a
  labels: {{hyperpod.jupyter.org/user: {ME}}}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime
            command: [torchrun, --nproc-per-node=1, /data/bert/train.py]
            resources: {{limits: {{nvidia.com/gpu: 1}}}}
---
apiVersion: sagemaker.amazonaws.com/v1
kind: HyperPodPyTorchJob
metadata:
  name: llama-pretrain
  namespace: team-b
  labels:
    hyperpod.jupyter.org/user: teammate
    kueue.x-k8s.io/queue-name: {QUEUE}
    kueue.x-k8s.io/priority-class: training-priority
spec:
  nprocPerNode: "8"
  replicaSpecs:
  - name: pods
    replicas: 4
    template:
      spec:
        containers:
        - name: pytorch
          image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/llama:latest
          command: [hyperpodrun, --nproc-per-node=8, /data/llama/pretrain.py]
          resources: {{limits: {{nvidia.com/gpu: 8}}}}
---
apiVersion: sagemaker.amazonaws.com/v1
kind: HyperPodPyTorchJob
metadata:
  name: mine-waiting
  namespace: team-b
  labels:
    hyperpod.jupyter.org/user: {ME}
    kueue.x-k8s.io/queue-name: {QUEUE}
spec:
  nprocPerNode: "8"
  replicaSpecs:
  - name: pods
    replicas: 2
    template:
      spec:
        containers:
        - name: pytorch
          image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/llama:latest
          command: [hyperpodrun, /data/me/finetune.py]
          resources: {{limits: {{nvidia.com/gpu: 8}}}}
---
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: hidden
  namespace: team-c
  labels: {{hyperpod.jupyter.org/user: {ME}}}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          containers: [{{name: pytorch, image: busybox, command: [sleep, "1"]}}]
"""


def running_status(start: str) -> dict[str, Any]:
    """The conditions the operators append (Created, then Running), as `status` of the job."""
    return {
        "startTime": start,
        "conditions": [
            {"type": "Created", "status": "True", "lastTransitionTime": start},
            {"type": "Running", "status": "True", "lastTransitionTime": start},
        ],
    }


def operator_pod(namespace: str, job: str, index: int, kind: str) -> dict[str, Any]:
    """A worker pod with the labels its operator sets (Kubeflow: job-name + replica-index,
    pkg/controller.v1/common/pod.go; HyperPod: HPJob)."""
    labels = (
        {
            "training.kubeflow.org/job-name": job,
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": str(index),
        }
        if kind == "PyTorchJob"
        else {"HPJob": job, "replica-index": str(index)}
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-worker-{index}" if kind == "PyTorchJob" else f"{job}-pods-{index}",
            "namespace": namespace,
            "labels": labels,
        },
        "spec": {"nodeName": f"hyperpod-i-{index:05d}", "containers": [{"name": "pytorch"}]},
        "status": {
            "phase": "Running",
            "startTime": "2026-12-01T08:00:00Z",
            "containerStatuses": [{"name": "pytorch", "state": {"running": {}}, "restartCount": 0}],
        },
    }


@pytest.fixture(scope="module")
def k8s(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RbacEmulatorThread, Path]]:
    emulator = RbacEmulatorThread()
    emulator.start()
    kubeconfig = emulator.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    # Like `kubectl apply -f` by each job's owner (no RBAC yet: they may create there).
    api = k8s_config.new_client_from_config(str(kubeconfig))
    custom = k8s_client.CustomObjectsApi(api)
    for manifest in yaml.safe_load_all(MANIFESTS):
        group, version = manifest["apiVersion"].split("/")
        plural = manifest["kind"].lower() + "s"
        meta = manifest["metadata"]
        created = custom.create_namespaced_custom_object(
            group, version, meta["namespace"], plural, manifest
        )
        if meta["name"] in ("bert-ft", "llama-pretrain"):  # the operator starts them
            created["status"] = running_status("2026-12-01T08:00:00Z")
            emulator.put(f"{group}/{version}/{plural}", created)
            for index in range(2 if meta["name"] == "bert-ft" else 4):
                pod = operator_pod(meta["namespace"], meta["name"], index, manifest["kind"])
                emulator.put("v1/pods", pod)
                assert emulator.emulator is not None
                emulator.emulator.logs.start(meta["namespace"], pod["metadata"]["name"])
                emulator.emulator.logs.write(
                    meta["namespace"],
                    pod["metadata"]["name"],
                    f"{meta['name']} rank {index} step 1\n",
                )
    api.close()
    # From now on, what this user may do (RoleBindings per namespace).
    emulator.rules(
        [
            *[("team-a", KUBEFLOW, r, {"list", "get", "watch", "delete"}) for r in JOBS[:1]],
            *[("team-a", HYPERPOD, r, {"list", "get", "watch", "delete"}) for r in JOBS[1:]],
            ("team-a", "", "pods", {"list", "get"}),
            ("team-a", "", "pods/log", {"get"}),
            ("team-b", KUBEFLOW, "pytorchjobs", {"list", "get"}),
            ("team-b", HYPERPOD, "hyperpodpytorchjobs", {"list", "get", "delete"}),
            ("team-b", "", "pods", {"list"}),
            # team-c: nothing. No namespaces list, no cluster-wide job list.
        ]
    )
    yield emulator, kubeconfig
    emulator.stop()


def settings(tmp_path: Path, kubeconfig: Path) -> HyperPodSettings:
    config = Config()
    config.HyperPodSettings.shared_fs_root = str(tmp_path / "fsx")
    config.HyperPodSettings.user = ME
    config.HyperPodSettings.orchestrator = "kubernetes"
    config.HyperPodSettings.job_store = str(tmp_path / "jobs.sqlite")
    config.KubernetesOrchestrator.kubeconfig = str(kubeconfig)
    config.KubernetesOrchestrator.namespace = "team-a"
    config.KubernetesOrchestrator.allowed_namespaces = ["team-a", "team-b", "team-c"]
    config.KubernetesOrchestrator.job_kind = "PyTorchJob"
    return HyperPodSettings(config=config)


@pytest.fixture
def service(k8s: tuple[RbacEmulatorThread, Path], tmp_path: Path) -> Iterator[HyperPodService]:
    made = HyperPodService(settings(tmp_path, k8s[1]))
    yield made
    made.close()


def test_jobs_of_every_readable_namespace_and_none_other(service: HyperPodService) -> None:
    page = service.queue(fresh=True)
    found = {row.id: row for row in page.jobs}
    assert set(found) == {
        "team-a/PyTorchJob/bert-ft",
        "team-b/HyperPodPyTorchJob/llama-pretrain",
        "team-b/HyperPodPyTorchJob/mine-waiting",
    }
    bert = found["team-a/PyTorchJob/bert-ft"]
    assert (bert.user, bert.state, bert.nodes, bert.gpus) == (ME, JobState.RUNNING, 2, 2)
    assert bert.partition == "team-a" and bert.mine and bert.adoptable and bert.started
    llama = found["team-b/HyperPodPyTorchJob/llama-pretrain"]
    assert (llama.user, llama.kind, llama.nodes, llama.gpus) == (
        "teammate",
        "HyperPodPyTorchJob",
        4,
        32,
    )
    assert llama.partition == QUEUE and llama.priority_class == "training-priority"
    assert not llama.mine and not llama.adoptable
    waiting = found["team-b/HyperPodPyTorchJob/mine-waiting"]
    assert waiting.state is JobState.PENDING and waiting.position == 1 and waiting.submitted
    assert waiting.explanation is not None
    assert f"1st of 1 pending on {QUEUE}" in waiting.explanation
    assert "1 running job(s) hold 4 nodes, 32 GPUs" in waiting.explanation
    assert "llama-pretrain (teammate, 4 nodes, 32 GPUs" in waiting.explanation
    # Filters on the server.
    assert {r.id for r in service.queue(mine=True).jobs} == {bert.id, waiting.id}
    assert [r.id for r in service.queue(partition=QUEUE, state="RUNNING").jobs] == [llama.id]
    assert service.queue(limit=2).total == 3 and len(service.queue(limit=2).jobs) == 2


def test_logs_of_others_only_where_pods_log_is_allowed(
    service: HyperPodService, k8s: tuple[RbacEmulatorThread, Path]
) -> None:
    found = {row.id: row for row in service.queue(fresh=True).jobs}
    llama = found["team-b/HyperPodPyTorchJob/llama-pretrain"]
    assert not llama.logs_readable and "team-b" in (llama.logs_reason or "")
    with pytest.raises(Forbidden):
        service.queue_logs(llama.id)
    bert = found["team-a/PyTorchJob/bert-ft"]
    assert bert.logs_readable
    assert "bert-ft rank 0 step 1" in service.queue_logs(bert.id).text
    with pytest.raises(Forbidden):
        service.adopt(llama.id)


def test_adopt_a_kubectl_job_status_logs_cancel_and_restart(
    service: HyperPodService, k8s: tuple[RbacEmulatorThread, Path], tmp_path: Path
) -> None:
    job = service.adopt("team-a/PyTorchJob/bert-ft")
    assert job.backend_id == "bert-ft" and job.spec.kind == "PyTorchJob"
    assert job.spec.nodes == 2 and job.spec.gpus_per_node == 1 and job.spec.namespace == "team-a"
    assert job.spec.command[0] == "torchrun"
    service.refresh(max_age=0)
    current = service.job(job.id)
    assert current.state is JobState.RUNNING
    assert [r.node for r in current.ranks] == ["hyperpod-i-00000", "hyperpod-i-00001"]

    reader = service.log_reader(job.id, 1)
    try:
        deadline = time.monotonic() + 20
        while b"bert-ft rank 1 step 1" not in reader.read(0, 4096):
            assert time.monotonic() < deadline, "rank 1's log never came"
            time.sleep(0.1)
    finally:
        reader.close()

    again = HyperPodService(settings(tmp_path, k8s[1]))
    try:
        assert again.job(job.id).backend_id == "bert-ft"
        assert again.cancel(job.id).state is JobState.CANCELLED
    finally:
        again.close()
    emulator = k8s[0]
    gone = [
        key
        for key in emulator.objects()
        if key[2] == "bert-ft" and not emulator.objects()[key].deleted
    ]
    assert not gone


def test_a_kubectl_job_is_nobodys_until_claimed_with_the_label(
    service: HyperPodService, k8s: tuple[RbacEmulatorThread, Path]
) -> None:
    """Kubernetes records no creator: a job applied with kubectl in my team's namespace without
    the user label is shown, not mine, and its adoption says how to claim it; once the label is
    added by hand (what `kubectl label` writes into metadata.labels), it is mine."""
    emulator = k8s[0]
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "kubectl-job", "namespace": "team-a", "labels": {}},
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "pytorch", "image": "busybox"}]}},
                }
            }
        },
    }
    emulator.put("kubeflow.org/v1/pytorchjobs", job)
    queue_id = "team-a/PyTorchJob/kubectl-job"
    row = {r.id: r for r in service.queue(fresh=True).jobs}[queue_id]
    assert row.user == "" and not row.mine and not row.adoptable
    with pytest.raises(Forbidden) as refused:
        service.adopt(queue_id)
    claim = f"kubectl label -n team-a pytorchjobs kubectl-job hyperpod.jupyter.org/user={ME}"
    assert claim in refused.value.message
    job["metadata"]["labels"] = {"hyperpod.jupyter.org/user": ME}
    emulator.put("kubeflow.org/v1/pytorchjobs", job)
    row = {r.id: r for r in service.queue(fresh=True).jobs}[queue_id]
    assert row.mine and row.adoptable and row.user == ME
    assert service.adopt(queue_id).backend_id == "kubectl-job"
