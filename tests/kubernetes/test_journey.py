"""Submit -> follow multi-rank logs -> succeed / fail / cancel, against the emulator + controller."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.backend import LogReader, StoredJob
from jupyter_hyperpod.core.errors import NotFound
from jupyter_hyperpod.core.models import JobState

from . import official
from .conftest import make_launch, program_lines, stored, wait_for, wait_state
from .controller import Controller
from .emulator import EmulatorThread


def read_all(reader: LogReader) -> str:
    data, offset = b"", 0
    while True:
        chunk = reader.read(offset, 1 << 20)
        if not chunk:
            return data.decode()
        data += chunk
        offset += len(chunk)


def follow_until(reader: LogReader, pattern: str, timeout: float = 20.0) -> str:
    return wait_for(
        lambda: read_all(reader) if re.search(pattern, read_all(reader)) else None, timeout
    )


def test_submit_follow_logs_and_succeed(
    backend: KubernetesOrchestrator, fs_root: Path, k8s: EmulatorThread
) -> None:
    launch = make_launch(
        fs_root,
        nodes=4,
        procs_per_node=1,
        gpus_per_node=1,
        efa_per_node=1,
        env={"FAKE_STEPS": "5", "FAKE_STEP_SECONDS": "0.3", "FAKE_START_DELAY": "0.5"},
    )
    update = backend.submit(launch)
    assert update.state is JobState.PENDING
    assert update.backend_id == launch.job_id
    assert (
        update.data
        and update.data.namespace == "default"
        and update.data.kind == "HyperPodPyTorchJob"
    )
    job = stored(launch, update)

    # Readers opened before the pods start: empty, then filled as the ranks log.
    readers = [backend.log_reader(job, rank) for rank in range(4)]
    assert all(reader.size() == 0 for reader in readers)
    pending = backend.refresh([job])[job.id]
    assert pending.state in (JobState.PENDING, JobState.RUNNING)

    wait_state(backend, job, JobState.RUNNING)
    # The scheduler spreads the pods, one GPU each, over the four nodes.
    running = wait_for(
        lambda: (
            (u := backend.refresh([job])[job.id]).ranks and all(rank.node for rank in u.ranks) and u
        )
    )
    assert [rank.rank for rank in running.ranks] == [0, 1, 2, 3]
    assert {rank.node for rank in running.ranks} == {f"hyperpod-i-{i:05d}" for i in range(4)}
    final = wait_state(backend, job, JobState.SUCCEEDED)
    assert final.exit_code == 0
    assert final.started and final.ended and final.ended >= final.started
    assert all(rank.state == "Succeeded" for rank in final.ranks)

    for rank, reader in enumerate(readers):
        text = follow_until(reader, rf"rank {rank}/4 done")
        assert program_lines(text, rank, 4) == [
            f"rank {rank}/4 step {s} loss {1.0 / (s + 1):.4f}" for s in range(5)
        ] + [f"rank {rank}/4 done"]
        # Offsets are byte offsets of this rank's log: a tail starts where its text starts.
        data, start, end = reader.tail(2)
        assert data.count(b"\n") == 2 and data.endswith(b"\n") and start == end - len(data)
        assert reader.read(start, len(data)) == data and end <= reader.size()
        reader.close()

    # The spool lives in the job directory and outlives the pods.
    spool = launch.job_dir_local / "k8s-logs" / "worker-2.log"
    # (torchrun's exit-barrier error may follow the program's last line: see program_lines)
    assert program_lines(spool.read_text(), 2, 4)[-1] == "rank 2/4 done"
    again = backend.log_reader(job, 2)
    assert read_all(again) == spool.read_text()
    again.close()


def test_failed_job_reports_exit_code_and_rank(
    backend: KubernetesOrchestrator, fs_root: Path
) -> None:
    """A Kubeflow PyTorchJob (c10d rendezvous through the operator's PET_* variables) whose rank 1
    fails: torchrun ends that pod with the rank's exit code, and the Never policy fails the job."""
    launch = make_launch(
        fs_root,
        "fails",
        kind="PyTorchJob",
        nodes=2,
        env={"FAKE_FAIL_RANK": "1", "FAKE_STEPS": "2"},
    )
    job = stored(launch, backend.submit(launch))
    final = wait_state(backend, job, JobState.FAILED, timeout=60)
    assert final.exit_code == 1
    assert "1 Worker replica(s) failed" in (final.state_reason or "")
    assert final.ranks[1].exit_code == 1 and final.ranks[1].state == "Failed: Error"
    # Rank 0's torchrun waits for its peer at the exit barrier: still running, or done.
    assert final.ranks[0].exit_code in (None, 0)
    reader = backend.log_reader(job, 1)
    assert "CUDA error" in follow_until(reader, "CUDA error")
    reader.close()
    backend.cancel(job)


def test_cancel_deletes_the_job_and_ends_the_logs(
    backend: KubernetesOrchestrator, fs_root: Path, k8s: EmulatorThread
) -> None:
    launch = make_launch(
        fs_root, "cancelled", nodes=2, env={"FAKE_STEPS": "100000", "FAKE_STEP_SECONDS": "0.05"}
    )
    job = stored(launch, backend.submit(launch))
    reader = backend.log_reader(job, 0)
    wait_state(backend, job, JobState.RUNNING)
    follow_until(reader, "step 2 ")
    update = backend.cancel(job)
    assert update.state is JobState.CANCELLED
    # The object is gone; pods are garbage-collected; the follower notices and finishes.
    follower = reader.follower  # type: ignore[attr-defined]
    wait_for(lambda: follower.done, timeout=60)
    size = reader.size()
    time.sleep(0.3)
    assert reader.size() == size
    reader.close()
    # A second cancel of a job already gone is not an error.
    assert backend.cancel(job).state is JobState.CANCELLED
    # Long after, refresh says it was deleted.
    old = stored(launch, update)
    old.backend_id = job.backend_id
    old.data = job.data
    old.created = time.time() - 3600
    later = backend.refresh([old])[old.id]
    assert later.state is JobState.CANCELLED


def crash_when(
    controller: Controller, backend: KubernetesOrchestrator, job: StoredJob, pod: str, line: str
) -> None:
    """Kill a pod's processes (as an OOM kill or a lost node does) once its log shows `line`."""
    reader = backend.log_reader(job, int(pod.rsplit("-", 1)[1]))
    follow_until(reader, line, timeout=60)
    reader.close()
    controller.runner_for(job.backend_id or "").pods[pod].crash()


def resumed_log(text: str, rank: int) -> None:
    """Steps up to the crash, the restart marker, the resume from the checkpoint, then done."""
    lines = text.splitlines()
    markers = [i for i, line in enumerate(lines) if line.startswith("[jupyter-hyperpod]")]
    assert markers and all(f"worker {rank} restarted" in lines[i] for i in markers), text
    before = lines[: markers[0]]
    assert before == [
        f"rank {rank}/2 step {s} loss {1.0 / (s + 1):.4f}" for s in range(len(before))
    ], text
    # The last container resumed from its checkpoint (torchrun's rendezvous may have given this
    # pod the other rank) and finished.
    ours = [line for line in lines[markers[-1] + 1 :] if line.startswith("rank ")]
    resumed = re.fullmatch(r"rank (\d)/2 resumed from checkpoint at step (\d+)", ours[0])
    assert resumed, text
    assert ours[-1] == f"rank {resumed.group(1)}/2 done", text


def test_logs_continue_after_a_restart(
    backend: KubernetesOrchestrator, fs_root: Path, controller: Controller
) -> None:
    """Auto-resume: worker 1 of a HyperPodPyTorchJob is killed mid-run; the operator restarts the
    job (its pods made again), the ranks resume from their checkpoints, and the followed log
    says so between the two runs."""
    launch = make_launch(
        fs_root,
        "resumes",
        nodes=2,
        auto_resume=True,
        max_retries=3,
        env={"FAKE_STEPS": "40", "FAKE_STEP_SECONDS": "0.1"},
    )
    job = stored(launch, backend.submit(launch))
    reader = backend.log_reader(job, 1)
    crash_when(controller, backend, job, f"{job.backend_id}-pods-1", "rank 1/2 step 3 ")
    final = wait_state(backend, job, JobState.SUCCEEDED, timeout=90)
    assert all(rank.restarts == 1 for rank in final.ranks)
    obj = controller.custom.get_namespaced_custom_object(
        "sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs", job.backend_id
    )
    assert obj["status"]["restartCount"] == 1
    faulty = obj["status"]["latestFaultyPodInstanceList"]
    assert faulty["faultyPodList"] == [f"{job.backend_id}-pods-1"]
    assert faulty["faultyRankList"] == ["1"] and faulty["restartType"] == "JLR"
    # The status the double writes is one AWS's model of the CRD reads.
    official.hyperpod.HyperPodPytorchJobStatus.model_validate(obj["status"], by_name=True)
    resumed_log(follow_until(reader, r"/2 done\n"), 1)
    reader.close()


def test_image_pull_error_is_reported_with_events(
    backend: KubernetesOrchestrator, fs_root: Path
) -> None:
    launch = make_launch(fs_root, "badimage", nodes=2, image="example.com/doesnotexist:1")
    job = stored(launch, backend.submit(launch))

    def stuck() -> object:
        update = backend.refresh([job])[job.id]
        pulled = [e for e in update.events or [] if "Failed to pull image" in e]
        return (
            update
            if len(pulled) == 2 and "ImagePullBackOff" in (update.state_reason or "")
            else None
        )

    update = wait_for(stuck)
    assert update.state is JobState.PENDING
    assert "worker 0: ImagePullBackOff" in (update.state_reason or "")
    assert any(
        "Failed to pull image" in event and f"{launch.job_id}-pods-1" in event
        for event in update.events or []
    )
    backend.cancel(job)


def test_unschedulable_is_explained(backend: KubernetesOrchestrator, fs_root: Path) -> None:
    launch = make_launch(fs_root, "toobig", nodes=2, gpus_per_node=16)
    job = stored(launch, backend.submit(launch))
    # The pod's condition and the scheduler's event are two writes (the event after, and
    # delivered by the warnings watch): a refresh may see the first alone.
    update = wait_for(
        lambda: (
            (u := backend.refresh([job])[job.id]).state_reason
            and "Insufficient" in u.state_reason
            and any("FailedScheduling" in event for event in u.events or [])
            and u
        )
    )
    assert update.state is JobState.PENDING
    assert "Unschedulable" in update.state_reason
    backend.cancel(job)


def test_hyperpod_pytorchjob_kind(
    backend: KubernetesOrchestrator, fs_root: Path, k8s: EmulatorThread
) -> None:
    launch = make_launch(
        fs_root,
        "hpjob",
        nodes=2,
        kind="HyperPodPyTorchJob",
        auto_resume=True,
        max_retries=2,
        env={"FAKE_STEPS": "2"},
    )
    update = backend.submit(launch)
    assert update.data and update.data.kind == "HyperPodPyTorchJob"
    job = stored(launch, update)
    reader = backend.log_reader(job, 1)
    final = wait_state(backend, job, JobState.SUCCEEDED)
    assert [r.rank for r in final.ranks] == [0, 1]
    assert follow_until(reader, "rank 1/2 done").splitlines()[0] == "rank 1/2 step 0 loss 1.0000"
    reader.close()


def test_refresh_is_batched(
    backend: KubernetesOrchestrator, fs_root: Path, k8s: EmulatorThread
) -> None:
    jobs = []
    for index in range(5):
        launch = make_launch(
            fs_root,
            f"batch{index}",
            kind="PyTorchJob",
            launcher="plain",
            env={"FAKE_STEPS": "1"},
        )
        jobs.append(stored(launch, backend.submit(launch)))
    for job in jobs:
        wait_state(backend, job, JobState.SUCCEEDED, timeout=60)
    # (The watch cache serves the pods of running jobs; ended jobs' pods are read once more.)
    wait_for(lambda: backend._cache.pods.fresh, 30)
    assert k8s.emulator is not None
    k8s.emulator._requests.clear()
    before = 0
    updates = backend.refresh(jobs)
    mine = [
        r
        for r in list(k8s.emulator._requests)[before:]
        if r.headers.get("User-Agent", "").startswith("jupyter-hyperpod")
    ]
    assert set(updates) == {job.id for job in jobs}
    assert all(
        update.state is JobState.SUCCEEDED and len(update.ranks or []) == 1
        for update in updates.values()
    )
    # One list of job objects and one list of pods by label selector (the controller's own calls
    # interleave, so count ours by path).
    paths = [
        r.url.path
        for r in mine
        if "pytorchjobs" in r.url.path
        and r.url.path.startswith("/apis/kubeflow.org/v1/namespaces/")
    ]
    pod_lists = [r for r in mine if r.url.path == "/api/v1/namespaces/default/pods"]
    assert len(paths) == 1 and len(pod_lists) == 1
    assert "in (" in pod_lists[0].params["labelSelector"]


def test_several_ranks_per_pod_are_split_by_rank(
    backend: KubernetesOrchestrator, fs_root: Path
) -> None:
    launch = make_launch(fs_root, "perrank", nodes=2, procs_per_node=3, env={"FAKE_STEPS": "3"})
    job = stored(launch, backend.submit(launch))
    readers = [backend.log_reader(job, rank) for rank in range(6)]
    wait_state(backend, job, JobState.SUCCEEDED, timeout=90)
    for rank, reader in enumerate(readers):
        worker = rank // 3
        text = follow_until(reader, f"rank {rank}/6 step 2")
        # torchrun's own unprefixed lines (if any) go to the pod's first rank.
        lines = [line for line in text.splitlines() if line.startswith("rank ")]
        expected = [f"rank {rank}/6 step {s} loss {1.0 / (s + 1):.4f}" for s in range(3)]
        assert lines[:3] == expected, (rank, worker, text)
        reader.close()
    with pytest.raises(NotFound):
        backend.log_reader(job, 6)


def test_a_late_reader_gets_the_log_from_before_the_restart(
    backend: KubernetesOrchestrator, fs_root: Path, controller: Controller
) -> None:
    """A container restarted in place (PyTorchJob, OnFailure) before anyone read it: its first
    run's log comes from the API's `previous` log."""
    launch = make_launch(
        fs_root,
        "late",
        kind="PyTorchJob",
        namespace="hyperpod-ns-team-a",
        launcher="plain",
        auto_resume=True,
        max_retries=3,
        env={"FAKE_STEPS": "40", "FAKE_STEP_SECONDS": "0.1", "RANK": "0", "WORLD_SIZE": "2"},
    )
    job = stored(launch, backend.submit(launch))
    pod = f"{job.backend_id}-worker-0"
    wait_for(lambda: b"step 5 " in k8s_log(controller, pod), timeout=60)
    controller.runner_for(job.backend_id or "").pods[pod].crash()
    wait_for(
        lambda: (u := backend.refresh([job])[job.id]).ranks and u.ranks[0].restarts == 1,
        timeout=60,
    )
    reader = backend.log_reader(job, 0)
    resumed_log(follow_until(reader, r"/2 done\n", timeout=90), 0)
    reader.close()


def k8s_log(controller: Controller, pod: str) -> bytes:
    first = controller.logs.read("hyperpod-ns-team-a", pod, 0)
    return first[0] if first else b""
