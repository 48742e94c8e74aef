"""Why a job waits: Kueue's admission (HyperPod task governance) and the scheduler's words, against
the emulator, the operator doubles and the Kueue double (kueue.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import config as k8s_config

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.models import JobState

from .conftest import make_launch, stored, wait_for, wait_state
from .controller import Controller
from .emulator import EmulatorThread
from .kueue import GROUP, JOB_UID_LABEL, VERSION, Kueue, install

NAMESPACE = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
FLAVOR = "ml.p5.48xlarge"


@pytest.fixture
def kueue(k8s: EmulatorThread, kubeconfig: Path, controller: Controller) -> Iterator[Kueue]:
    assert k8s.emulator is not None
    before = dict(k8s.emulator.admission)
    install(k8s.emulator)
    # HyperPod task governance: a ClusterQueue per team with the GPUs of its instance type, and
    # the team namespace's LocalQueue pointing at it (AWS's HyperPod task governance docs).
    k8s.put(
        f"{GROUP}/{VERSION}/resourceflavors",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR},
        },
    )
    k8s.put(
        f"{GROUP}/{VERSION}/clusterqueues",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ClusterQueue",
            "metadata": {"name": "hyperpod-ns-team-a-clusterqueue"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu", "vpc.amazonaws.com/efa"],
                        "flavors": [
                            {
                                "name": FLAVOR,
                                "resources": [
                                    {"name": "nvidia.com/gpu", "nominalQuota": 8},
                                    {"name": "vpc.amazonaws.com/efa", "nominalQuota": 32},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
    )
    k8s.put(
        f"{GROUP}/{VERSION}/localqueues",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": NAMESPACE},
            "spec": {"clusterQueue": "hyperpod-ns-team-a-clusterqueue"},
        },
    )
    api = k8s_config.new_client_from_config(str(kubeconfig))
    double = Kueue(api)
    double.start()
    yield double
    double.stop()
    k8s.emulator.admission.clear()
    k8s.emulator.admission.update(before)
    api.close()


def test_over_quota_job_waits_with_kueues_reason(
    backend: KubernetesOrchestrator, fs_root: Path, kueue: Kueue, controller: Controller
) -> None:
    launch = make_launch(
        fs_root,
        "overquota",
        nodes=2,
        gpus_per_node=8,
        kind="PyTorchJob",
        namespace=NAMESPACE,
        queue=QUEUE,
    )
    job = stored(launch, backend.submit(launch))
    update = wait_for(
        lambda: (
            (u := backend.refresh([job])[job.id]).state_reason
            and "couldn't assign flavors" in u.state_reason
            and u
        )
    )
    assert update.state is JobState.PENDING
    assert update.state_reason == (
        f"Kueue has not admitted it ({QUEUE}): couldn't assign flavors to pod set worker: "
        f"insufficient quota for nvidia.com/gpu in flavor {FLAVOR}, request > maximum capacity "
        "(16 > 8)"
    )
    # Kueue's Warning event on the Workload is among the job's events.
    events = wait_for(
        lambda: [e for e in backend.refresh([job])[job.id].events or [] if "Workload " in e]
    )
    assert "Pending: couldn't assign flavors to pod set worker" in events[0]
    # The Workload is the job's, as Kueue makes it; the suspended job has no pod.
    obj = controller.custom.get_namespaced_custom_object(
        "kubeflow.org", "v1", NAMESPACE, "pytorchjobs", job.backend_id
    )
    assert obj["spec"]["runPolicy"]["suspend"] is True
    workloads = controller.custom.list_namespaced_custom_object(
        GROUP,
        VERSION,
        NAMESPACE,
        "workloads",
        label_selector=f"{JOB_UID_LABEL}={obj['metadata']['uid']}",
    )["items"]
    assert [w["metadata"]["ownerReferences"][0]["name"] for w in workloads] == [job.backend_id]
    name = workloads[0]["metadata"]["name"]
    assert name.startswith(f"pytorchjob-{job.backend_id}-")
    # As `kubectl describe workload` finds them: the events about that object.
    described = controller.core.list_namespaced_event(
        NAMESPACE, field_selector=f"involvedObject.name={name}"
    ).items
    assert [(e.reason, e.type, e.source.component) for e in described] == [
        ("Pending", "Warning", "kueue-admission")
    ]
    pods = controller.core.list_namespaced_pod(
        NAMESPACE, label_selector=f"training.kubeflow.org/job-name={job.backend_id}"
    ).items
    assert pods == []
    backend.cancel(job)


def test_job_within_quota_is_admitted_and_runs(
    backend: KubernetesOrchestrator, fs_root: Path, kueue: Kueue, controller: Controller
) -> None:
    launch = make_launch(
        fs_root,
        "admitted",
        nodes=1,
        gpus_per_node=4,
        namespace=NAMESPACE,
        queue=QUEUE,
        env={"FAKE_STEPS": "1"},
    )
    job = stored(launch, backend.submit(launch))
    final = wait_state(backend, job, JobState.SUCCEEDED, JobState.FAILED, timeout=90)
    assert final.state is JobState.SUCCEEDED, final
    # It ran because Kueue admitted it: created suspended, resumed on admission.
    obj = controller.custom.get_namespaced_custom_object(
        "sagemaker.amazonaws.com", "v1", NAMESPACE, "hyperpodpytorchjobs", job.backend_id
    )
    assert obj["spec"]["runPolicy"]["suspend"] is False
    (workload,) = controller.custom.list_namespaced_custom_object(
        GROUP,
        VERSION,
        NAMESPACE,
        "workloads",
        label_selector=f"{JOB_UID_LABEL}={obj['metadata']['uid']}",
    )["items"]
    conditions = {c["type"]: c for c in workload["status"]["conditions"]}
    assert conditions["Admitted"]["status"] == "True"
    assert conditions["QuotaReserved"]["message"] == (
        "Quota reserved in ClusterQueue hyperpod-ns-team-a-clusterqueue"
    )
    assert not kueue.errors


def test_unschedulable_pod_says_what_the_scheduler_says(
    backend: KubernetesOrchestrator, fs_root: Path, controller: Controller
) -> None:
    """Without Kueue: the scheduler's FailedScheduling event and Unschedulable condition, as
    `kubectl describe pod` shows them, become the job's reason."""
    launch = make_launch(fs_root, "toomany", nodes=1, gpus_per_node=16)
    job = stored(launch, backend.submit(launch))
    message = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    update = wait_for(
        lambda: (
            (u := backend.refresh([job])[job.id]).state_reason and message in u.state_reason and u
        )
    )
    assert update.state is JobState.PENDING
    assert update.state_reason == f"worker 0: Unschedulable: {message}"
    pod = f"{job.backend_id}-pods-0"
    described = controller.core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={pod}"
    ).items
    assert [(e.reason, e.type, e.source.component, e.message) for e in described] == [
        ("FailedScheduling", "Warning", "default-scheduler", message)
    ]
    backend.cancel(job)


def test_our_own_events_stay_beside_the_clusters_warnings(
    backend: KubernetesOrchestrator, fs_root: Path, controller: Controller
) -> None:
    """A refresh replaces the cluster's warnings with the current ones, never our own lines
    (the create, an agent's action recorded by `add_event`, a watchdog verdict)."""
    launch = make_launch(fs_root, "ownevents", nodes=1, gpus_per_node=16)
    job = stored(launch, backend.submit(launch))
    job.events = [*job.events, "submitted by an agent via MCP (preview 1a2b)"]
    update = wait_for(
        lambda: (
            (u := backend.refresh([job])[job.id]).events
            and any("FailedScheduling" in line for line in u.events)
            and u
        )
    )
    assert "submitted by an agent via MCP (preview 1a2b)" in update.events
    job.events = list(update.events)
    again = backend.refresh([job])[job.id]
    assert again.events is not None
    assert again.events.count("submitted by an agent via MCP (preview 1a2b)") == 1
    assert sum("FailedScheduling" in line for line in again.events) == 1  # replaced, not piled
    backend.cancel(job)
