"""A user's own Kubeflow Trainer v2 TrainJob on a cluster that serves trainer.kubeflow.org
(backends/kubernetes/trainjob.py): found through API discovery with the real client, checked with
the kubeflow-trainer-api models, policed, created, and tracked through its JobSet's pods and its
conditions.

The API server double serves the group here (EmulatorThread(served=[..., TRAINJOBS])); the
session's double does not (test_user_manifest.py). Kubeflow Trainer's controller is played by
`trainer_controller` below, as github.com/kubeflow/trainer does it: one JobSet named after the
TrainJob whose `node` replicated job is an Indexed Job of `numNodes` pods
(pkg/runtime/framework/plugins/jobset; pods labelled jobset.sigs.k8s.io/jobset-name,
jobset.sigs.k8s.io/replicatedjob-name and batch.kubernetes.io/job-completion-index), then the
TrainJob's `Complete` or `Failed` condition (pkg/apis/trainer/v1alpha1/trainjob_types.go) and
the trainer's `trainerStatus` (progressPercentage, estimatedRemainingSeconds, metrics)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import kubernetes
import pytest
import yaml
from kubeflow_trainer_api.models.trainer_v1alpha1_train_job import TrainerV1alpha1TrainJob

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.errors import Forbidden, InvalidRequest, PathNotAllowed
from jupyter_hyperpod.core.models import JobState
from jupyter_hyperpod.core.service import HyperPodService

from .conftest import IMAGE, make_settings
from .emulator import RESOURCES, TRAINJOBS, EmulatorThread, now_iso

TRAINJOB = f"""\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: tj-finetune
  namespace: kubeflow
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    image: {IMAGE}
    numNodes: 2
    command: [torchrun, /data/Data-Scientist/scripts/train.py]
    resourcesPerNode:
      limits:
        nvidia.com/gpu: 1
"""


@pytest.fixture(scope="module")
def trainer_cluster() -> Iterator[EmulatorThread]:
    emulator = EmulatorThread(served=[*RESOURCES, TRAINJOBS])
    emulator.start()
    yield emulator
    emulator.stop()


@pytest.fixture
def service(
    fs_root: Path, trainer_cluster: EmulatorThread, tmp_path: Path
) -> Iterator[HyperPodService]:
    kubeconfig = trainer_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    settings = make_settings(fs_root, kubeconfig)
    settings.job_store = str(tmp_path / "jobs.sqlite")
    settings.partition = "user"
    core = HyperPodService(settings, KubernetesOrchestrator(settings=settings))
    yield core
    core.close()


def trainer_controller(
    cluster: EmulatorThread, obj: dict[str, Any], phase: str, status: dict[str, Any]
) -> None:
    """What Kubeflow Trainer and JobSet do with the TrainJob: its trainer pods, then its status."""
    name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
    for index in range(obj["spec"]["trainer"]["numNodes"]):
        exit_code = 0 if phase == "Succeeded" else (3 if index == 1 else 0)
        terminated = {"exitCode": exit_code, "reason": "Completed" if not exit_code else "Error"}
        cluster.put(
            "v1/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-node-0-{index}-abcde",
                    "namespace": namespace,
                    "labels": {
                        "jobset.sigs.k8s.io/jobset-name": name,
                        "jobset.sigs.k8s.io/replicatedjob-name": "node",
                        "batch.kubernetes.io/job-completion-index": str(index),
                    },
                    "creationTimestamp": now_iso(),
                },
                "spec": {"nodeName": f"hyperpod-i-{index:05d}", "containers": [{"name": "node"}]},
                "status": {
                    "phase": phase if phase != "Failed" or exit_code else "Succeeded",
                    "containerStatuses": [{"name": "node", "state": {"terminated": terminated}}],
                },
            },
        )
    stored = dict(obj, status=status)
    cluster.put(TRAINJOBS, stored)


def test_trainjob_found_checked_created_and_tracked(
    service: HyperPodService, trainer_cluster: EmulatorThread
) -> None:
    preview = service.apply(TRAINJOB, filename="tj.yaml", dry_run=True)
    assert preview.problems == []
    changed = {c.path for c in preview.changes}
    assert "metadata.labels.hyperpod.jupyter.org/job-id" in changed  # ours, shown
    sent = yaml.safe_load(preview.text)
    assert TrainerV1alpha1TrainJob.from_dict(sent) is not None  # Kubeflow's model takes it

    applied = service.apply(TRAINJOB, filename="tj.yaml")
    job = applied.job
    assert job is not None and job.spec.kind == "TrainJob" and job.spec.nodes == 2
    # Stored as this server's: while it is handed to the cluster, a refresh never takes it for
    # a start left behind by a stopped server (JobBook.left_behind).
    assert service.store.owner_of(job.id) == service.owner
    created = read_trainjob(trainer_cluster, "kubeflow", "tj-finetune")
    assert created["metadata"]["labels"]["hyperpod.jupyter.org/job-id"] == job.id

    trainer_controller(
        trainer_cluster,
        created,
        "Succeeded",
        {
            "conditions": [
                {
                    "type": "Complete",
                    "status": "True",
                    "reason": "JobsCompleted",
                    "message": "TrainJob is completed",
                    "lastTransitionTime": now_iso(),
                }
            ],
            "trainerStatus": {"progressPercentage": 100, "estimatedRemainingSeconds": 0},
        },
    )
    assert read_trainjob(trainer_cluster, "kubeflow", "tj-finetune")["status"]["conditions"]
    service.refresh(max_age=0)
    done = service.job(job.id)
    assert done.state is JobState.SUCCEEDED, done
    assert [r.rank for r in done.ranks] == [0, 1]
    assert {r.node for r in done.ranks} == {"hyperpod-i-00000", "hyperpod-i-00001"}


def test_a_running_trainjob_shows_its_trainers_progress(
    service: HyperPodService, trainer_cluster: EmulatorThread
) -> None:
    """The trainer's own figure (status.trainerStatus) is the job's progress, read before its log."""
    text = TRAINJOB.replace("tj-finetune", "tj-running")
    job = service.apply(text, filename="tj.yaml").job
    assert job is not None
    created = read_trainjob(trainer_cluster, "kubeflow", "tj-running")
    trainer_controller(
        trainer_cluster,
        created,
        "Running",
        {
            "trainerStatus": {
                "progressPercentage": 40,
                "estimatedRemainingSeconds": 90,
                "metrics": [{"name": "loss", "value": "1.25"}],
            }
        },
    )
    try:
        # A refresh under way may have read the pods before the status: progress is kept for
        # PROGRESS_MAX_AGE, then read again, so a later refresh brings the trainer's figure.
        deadline = time.monotonic() + 30
        while True:
            service.refresh(max_age=0)
            running = service.job(job.id)
            progress = running.progress
            if (progress and progress.source == "trainerStatus") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert running.state is JobState.RUNNING, running
        assert progress is not None and progress.source == "trainerStatus", running
        figures = (progress.step, progress.total, progress.eta_seconds, progress.loss)
        assert figures == (40, 100, 90, 1.25)
    finally:
        assert service.cancel(job.id).state is JobState.CANCELLED
    with pytest.raises(kubernetes.client.ApiException) as gone:  # cancel deleted the TrainJob
        read_trainjob(trainer_cluster, "kubeflow", "tj-running")
    assert gone.value.status == 404


def test_trainjob_failure_names_the_rank(
    service: HyperPodService, trainer_cluster: EmulatorThread
) -> None:
    text = TRAINJOB.replace("tj-finetune", "tj-fails")
    job = service.apply(text, filename="tj.yaml").job
    assert job is not None
    created = read_trainjob(trainer_cluster, "kubeflow", "tj-fails")
    trainer_controller(
        trainer_cluster,
        created,
        "Failed",
        {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "JobsFailed",
                    "message": "jobset failed",
                    "lastTransitionTime": now_iso(),
                }
            ]
        },
    )
    service.refresh(max_age=0)
    done = service.job(job.id)
    assert done.state is JobState.FAILED
    assert done.exit_code == 3
    assert done.failed_rank == 1


@pytest.mark.parametrize(
    ("edit", "error", "message"),
    [
        (
            lambda o: o["spec"]["trainer"].update(bogus=1),
            InvalidRequest,
            "spec.trainer.bogus: TrainJob (trainer.kubeflow.org/v1alpha1) has no such field",
        ),
        (
            lambda o: o["spec"]["trainer"].update(numNodes="two"),
            InvalidRequest,
            "not a valid TrainJob",
        ),
        (lambda o: o["spec"].pop("runtimeRef"), InvalidRequest, "not a valid TrainJob"),
        (
            lambda o: o["metadata"].update(name="TJ_upper"),
            InvalidRequest,
            "is not a DNS-1035 label",
        ),
        (
            lambda o: o["metadata"].update(namespace="kube-system"),
            Forbidden,
            "rule: allowed namespaces",
        ),
        (
            lambda o: o["spec"].update(
                runtimePatches=[{"manager": "me", "trainingRuntimeSpec": {}}]
            ),
            Forbidden,
            "rule: TrainJob runtime patches",
        ),
        (
            lambda o: o["spec"]["trainer"].update(command=["python", "/data/someone-else/x.py"]),
            PathNotAllowed,
            "outside your partition",
        ),
        (lambda o: o.update(status={}), InvalidRequest, "written by the controller"),
    ],
    ids=[
        "unknown field",
        "type",
        "no runtimeRef",
        "name",
        "namespace",
        "patches",
        "path",
        "status",
    ],
)
def test_hostile_trainjobs_refused_nothing_created(
    service: HyperPodService, trainer_cluster: EmulatorThread, edit: Any, error: Any, message: str
) -> None:
    obj = yaml.safe_load(TRAINJOB.replace("tj-finetune", "tj-hostile"))
    edit(obj)
    for dry_run in (True, False):
        with pytest.raises(error, match=re.escape(message)) as refused:
            service.apply(yaml.safe_dump(obj), filename="tj.yaml", dry_run=dry_run)
        assert refused.value.status == (403 if error is not InvalidRequest else 400)
    assert service.jobs().total == 0


def read_trainjob(cluster: EmulatorThread, namespace: str, name: str) -> dict[str, Any]:
    """The TrainJob as the API server has it, read with the real client."""
    api = kubernetes.client.ApiClient(_configuration(cluster.url))
    try:
        found = kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", name
        )
        return cast(dict[str, Any], found)
    finally:
        api.close()


def _configuration(url: str) -> kubernetes.client.Configuration:
    config = kubernetes.client.Configuration()
    config.host = url
    config.api_key = {"authorization": "Bearer test-token"}
    return config
