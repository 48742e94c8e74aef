"""The rules of a user's manifest beyond the seed's (backends/kubernetes/user_manifest.py),
through the core in this process against the API server double: a HyperPodPyTorchJob (checked
with AWS's model as the emulator's admission does), pods forced to the partition's owner, the
backoffLimit HyperPod's retries need, the auto-resume namespaces."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.errors import InvalidRequest
from jupyter_hyperpod.core.service import HyperPodService

from . import official
from .conftest import IMAGE, make_settings
from .controller import Controller

HPJOB = f"""\
apiVersion: sagemaker.amazonaws.com/v1
kind: HyperPodPyTorchJob
metadata:
  name: hp-finetune
  namespace: hyperpod-ns-team-a
spec:
  nprocPerNode: "1"
  runPolicy:
    jobMaxRetryCount: 2
  replicaSpecs:
    - name: pods
      replicas: 2
      template:
        spec:
          serviceAccountName: eks-hyperpod-sa
          containers:
            - name: pytorch
              image: {IMAGE}
              command: [hyperpodrun, --nnodes=2, /data/Data-Scientist/scripts/train.py]
              securityContext:
                runAsUser: 0
              volumeMounts:
                - name: fsx
                  mountPath: /data/Data-Scientist
                  subPath: Data-Scientist
          volumes:
            - name: fsx
              persistentVolumeClaim:
                claimName: fsx-claim
"""

RETRIES = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: retried
  namespace: NAMESPACE
  annotations:
    sagemaker.amazonaws.com/enable-job-auto-resume: "true"
    sagemaker.amazonaws.com/job-max-retry-count: "2"
spec:
  runPolicy:
    backoffLimit: 1
  pytorchReplicaSpecs:
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: IMAGE
              command: [python3, -c, "print(1)"]
""".replace("IMAGE", IMAGE)


@pytest.fixture
def service(
    fs_root: Path, kubeconfig: Path, controller: Controller, tmp_path: Path
) -> Iterator[HyperPodService]:
    settings = make_settings(fs_root, kubeconfig, run_as_partition_owner=True)
    settings.job_store = str(tmp_path / "jobs.sqlite")
    settings.partition = "user"  # /data/Data-Scientist, as in the seed
    core = HyperPodService(settings, KubernetesOrchestrator(settings=settings))
    yield core
    core.close()


def test_hyperpodpytorchjob_forced_to_the_partition_owner(
    service: HyperPodService, fs_root: Path
) -> None:
    if os.geteuid() == 0:
        os.chown(fs_root / "Data-Scientist", 4242, 4343)
    owner = (fs_root / "Data-Scientist").stat()
    applied = service.apply(HPJOB, filename="hp.yaml", dry_run=True)
    assert applied.problems == []
    sent = yaml.safe_load(applied.text)
    official.check_hyperpodpytorchjob(sent)  # AWS's model of the CRD takes what is sent
    pod = sent["spec"]["replicaSpecs"][0]["template"]["spec"]
    if owner.st_uid != 0:
        assert pod["securityContext"] == {"runAsUser": owner.st_uid, "runAsGroup": owner.st_gid}
        assert pod["containers"][0]["securityContext"]["runAsUser"] == owner.st_uid
        changed = {c.path: c for c in applied.changes}
        path = "spec.replicaSpecs[0].template.spec.containers[0].securityContext.runAsUser"
        assert changed[path].action == "changed"
        assert "partition's owner" in changed[path].reason


def test_backoff_limit_below_the_retries_is_fixed(service: HyperPodService) -> None:
    text = RETRIES.replace("NAMESPACE", "kubeflow")
    preview = service.apply(text, dry_run=True)
    (problem,) = preview.problems
    assert problem.path == "spec.runPolicy.backoffLimit"
    assert problem.message.startswith("line 11: backoffLimit 1 fails the job")
    fixed = yaml.safe_load(service.apply(text, dry_run=True, fix=True).text)
    assert fixed["spec"]["runPolicy"]["backoffLimit"] == 3


def test_auto_resume_only_in_its_namespaces(service: HyperPodService) -> None:
    with pytest.raises(InvalidRequest, match="auto-resume runs a PyTorchJob only") as error:
        service.apply(RETRIES.replace("NAMESPACE", "team-a"), dry_run=True)
    assert error.value.field == "metadata.namespace"
    assert error.value.message.startswith("line 5: ")


def test_trainjob_where_not_served_and_status_refused_by_field(service: HyperPodService) -> None:
    """This cluster (the session's API server double) serves no trainer.kubeflow.org: asked
    through API discovery, a TrainJob is a 400 that says so (test_trainjob.py: one that does)."""
    text: dict[str, Any] = yaml.safe_load(RETRIES.replace("NAMESPACE", "kubeflow"))
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    }
    with pytest.raises(
        InvalidRequest, match=r"does not serve trainer\.kubeflow\.org/v1alpha1"
    ) as error:
        service.apply(yaml.safe_dump(trainjob), dry_run=True)
    assert error.value.field == "apiVersion"
    assert error.value.status == 400
    with pytest.raises(InvalidRequest, match="not a training job") as error:
        service.apply(yaml.safe_dump({**text, "kind": "Pod"}), dry_run=True)
    assert error.value.field == "kind"
    with pytest.raises(InvalidRequest, match="written by the operator"):
        service.apply(yaml.safe_dump({**text, "status": {}}), dry_run=True)


def test_hyperpodpytorchjob_with_torchrun_gets_hyperpodrun(service: HyperPodService) -> None:
    text = HPJOB.replace("[hyperpodrun, --nnodes=2,", "[/usr/local/bin/torchrun, --nnodes=2,")
    preview = service.apply(text, filename="hp.yaml", dry_run=True)
    (problem,) = preview.problems
    assert problem.path == "spec.replicaSpecs[0].template.spec.containers[0].command[0]"
    assert "hyperpodrun" in problem.message and problem.message.startswith("line 19: ")
    with pytest.raises(InvalidRequest, match="--fix"):
        service.apply(text, filename="hp.yaml")
    fixed = yaml.safe_load(service.apply(text, filename="hp.yaml", dry_run=True, fix=True).text)
    command = fixed["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["hyperpodrun", "--nnodes=2"]
