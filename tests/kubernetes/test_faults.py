"""HyperPod's fault fields (restartCount, latestFaultyPodInstanceList) become the job's restart
history and its failed rank; each rank's end is its container's finishedAt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.backends.kubernetes.jobs import rank_of_pod, record_faults, timestamp
from jupyter_hyperpod.backends.kubernetes.state import KubernetesState
from jupyter_hyperpod.core.backend import JobUpdate, StoredJob
from jupyter_hyperpod.core.models import JobState, RankFault

from .conftest import make_launch, stored, wait_for
from .controller import Controller


def refresh_until_over(backend: KubernetesOrchestrator, job: StoredJob) -> JobUpdate:
    """Refresh as the service does: what each refresh reports is merged into the stored data."""

    def over() -> JobUpdate | None:
        update = backend.refresh([job])[job.id]
        if update.data:
            job.data = KubernetesState.load(job.data).merged(update.data)
        return update if update.state and update.state.finished else None

    result: JobUpdate = wait_for(over, timeout=90)
    return result


def test_hyperpod_faults_are_the_restart_history_and_name_the_failed_rank(
    backend: KubernetesOrchestrator, fs_root: Path, controller: Controller
) -> None:
    launch = make_launch(
        fs_root,
        "faulty",
        nodes=2,
        kind="HyperPodPyTorchJob",
        auto_resume=True,
        max_retries=1,
        env={"FAKE_STEPS": "2", "FAKE_FAIL_RANK": "1"},
    )
    job = stored(launch, backend.submit(launch))
    final = refresh_until_over(backend, job)
    assert final.state is JobState.FAILED
    pod = f"{job.backend_id}-pods-1"
    obj = controller.custom.get_namespaced_custom_object(
        "sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs", job.backend_id or ""
    )
    node = obj["status"]["latestFaultyPodInstanceList"]["faultyInstanceIdList"][0]
    assert node.startswith("hyperpod-i-")
    ranks = {r.rank: r for r in final.ranks or []}
    # Restart 1 (a job-level restart) on rank 1's fault, then the fault the job failed on.
    assert ranks[1].faults == [
        RankFault(restart=1, restart_type="JLR", pod=pod, node=node),
        RankFault(restart=None, restart_type="JLR", pod=pod, node=node),
    ]
    assert ranks[0].faults == []
    assert ranks[1].restarts == 1
    assert (final.state_reason or "").startswith(f"rank 1 ({pod} on {node}) faulty: ")
    assert "failed after 1 restart(s)" in (final.state_reason or "")
    assert [e["restart"] for e in KubernetesState.load(job.data).faults] == [1, None]


def test_each_rank_ends_when_its_container_finished(
    backend: KubernetesOrchestrator, fs_root: Path, controller: Controller
) -> None:
    launch = make_launch(
        fs_root,
        "ends",
        kind="PyTorchJob",
        nodes=2,
        env={"FAKE_FAIL_RANK": "1", "FAKE_STEPS": "2"},
    )
    job = stored(launch, backend.submit(launch))
    final = refresh_until_over(backend, job)
    assert final.state is JobState.FAILED
    pods = controller.core.list_namespaced_pod(
        "default", label_selector=f"training.kubeflow.org/job-name={job.backend_id}"
    ).items
    finished = {}
    for pod in pods:
        raw = controller.api.sanitize_for_serialization(pod)
        state = raw["status"]["containerStatuses"][0]["state"]
        if "terminated" in state:
            finished[rank_of_pod(raw)] = timestamp(state["terminated"]["finishedAt"])
    assert 1 in finished
    assert {r.rank: r.ended for r in final.ranks or [] if r.rank in finished} == finished
    backend.cancel(job)


def test_faults_are_recorded_once_per_restart() -> None:
    """What each refresh sees of the status, in order: the history keeps one entry per restart
    and the final fault, even when the same rank fails each time."""
    latest: dict[str, Any] = {
        "restartType": "JLR",
        "faultyPodList": ["j-pods-3"],
        "faultyRankList": ["3"],
        "faultyInstanceIdList": ["i-0abc"],
    }
    history: list[dict[str, Any]] = []
    for status, failed in [
        ({"restartCount": 0}, False),
        ({"restartCount": 1, "latestFaultyPodInstanceList": latest}, False),
        ({"restartCount": 1, "latestFaultyPodInstanceList": latest}, False),
        ({"restartCount": 2, "latestFaultyPodInstanceList": latest}, False),
        ({"restartCount": 2, "latestFaultyPodInstanceList": latest}, True),
        ({"restartCount": 2, "latestFaultyPodInstanceList": latest}, True),
    ]:
        history = record_faults(status, history, failed)
    assert [entry["restart"] for entry in history] == [1, 2, None]
    assert {entry["pods"][0] for entry in history} == {"j-pods-3"}
