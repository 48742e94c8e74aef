"""Submit -> follow multi-rank logs -> succeed / fail / cancel, against the emulator + controller."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.base import LogReader
from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.core.errors import NotFound
from jupyter_hyperpod.core.models import JobState

from .conftest import make_launch, stored, wait_for, wait_state
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
        and update.data["namespace"] == "default"
        and update.data["kind"] == "PyTorchJob"
    )
    job = stored(launch, update)

    # Readers opened before the pods start: empty, then filled as the ranks log.
    readers = [backend.log_reader(job, rank) for rank in range(4)]
    assert all(reader.size() == 0 for reader in readers)
    pending = backend.refresh([job])[job.id]
    assert pending.state in (JobState.PENDING, JobState.RUNNING)

    running = wait_state(backend, job, JobState.RUNNING)
    assert [rank.rank for rank in running.ranks] == [0, 1, 2, 3]
    assert {rank.node for rank in running.ranks} == {f"hyperpod-i-{i:05d}" for i in range(4)}
    final = wait_state(backend, job, JobState.SUCCEEDED)
    assert final.exit_code == 0
    assert final.started and final.ended and final.ended >= final.started
    assert all(rank.state == "Succeeded" for rank in final.ranks)

    for rank, reader in enumerate(readers):
        text = follow_until(reader, rf"rank {rank}/4 done")
        lines = text.splitlines()
        assert lines == [f"rank {rank}/4 step {s} loss {1.0 / (s + 1):.4f}" for s in range(5)] + [
            f"rank {rank}/4 done"
        ]
        # Offsets are byte offsets of this rank's log: a tail starts where its text starts.
        data, start, end = reader.tail(2)
        assert (
            data.decode() == "\n".join(lines[-2:]) + "\n"
            and end == reader.size()
            and start == end - len(data)
        )
        reader.close()

    # The spool lives in the job directory and outlives the pods.
    spool = launch.job_dir_local / "k8s-logs" / "worker-2.log"
    assert spool.read_text().endswith("rank 2/4 done\n")
    again = backend.log_reader(job, 2)
    assert read_all(again) == spool.read_text()
    again.close()


def test_failed_job_reports_exit_code_and_rank(
    backend: KubernetesOrchestrator, fs_root: Path
) -> None:
    launch = make_launch(fs_root, "fails", nodes=2, env={"FAKE_FAIL_RANK": "1", "FAKE_STEPS": "2"})
    job = stored(launch, backend.submit(launch))
    final = wait_state(backend, job, JobState.FAILED)
    assert final.exit_code == 1
    assert "1 Worker replica(s) failed" in (final.state_reason or "")
    assert final.ranks[1].exit_code == 1 and final.ranks[1].state == "Failed: Error"
    assert final.ranks[0].exit_code == 0
    reader = backend.log_reader(job, 1)
    assert "CUDA error" in follow_until(reader, "CUDA error")
    reader.close()


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
    wait_for(lambda: follower.done, timeout=20)
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


def test_logs_continue_after_a_restart(backend: KubernetesOrchestrator, fs_root: Path) -> None:
    launch = make_launch(
        fs_root,
        "resumes",
        nodes=2,
        auto_resume=True,
        max_retries=3,
        # The crash comes at step 10, well after the follower has started streaming (the case
        # of a first look after the restart is the next test).
        env={"FAKE_RESTART_RANK": "1", "FAKE_STEPS": "20", "FAKE_STEP_SECONDS": "0.2"},
    )
    job = stored(launch, backend.submit(launch))
    reader = backend.log_reader(job, 1)
    follow_until(reader, "rank 1/2 step 2 ")
    final = wait_state(backend, job, JobState.SUCCEEDED, timeout=30)
    assert final.ranks[1].restarts == 1
    text = follow_until(reader, "rank 1/2 done")
    lines = text.splitlines()
    assert "rank 1/2 NCCL error: unhandled system error" in lines, text
    crash = lines.index("rank 1/2 NCCL error: unhandled system error")
    assert lines[crash + 1].startswith("[jupyter-hyperpod] worker 1 restarted")
    assert lines[crash + 2] == "rank 1/2 resumed from checkpoint at step 10"
    assert lines[:crash] == [f"rank 1/2 step {s} loss {1.0 / (s + 1):.4f}" for s in range(11)]
    assert lines[-1] == "rank 1/2 done"
    assert len(lines) == len(set(lines)), "no line is duplicated by reconnecting"
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
        "Failed to pull image" in event and f"{launch.job_id}-worker-1" in event
        for event in update.events or []
    )
    backend.cancel(job)


def test_unschedulable_is_explained(backend: KubernetesOrchestrator, fs_root: Path) -> None:
    launch = make_launch(
        fs_root, "toobig", nodes=2, gpus_per_node=16, env={"FAKE_UNSCHEDULABLE": "1"}
    )
    job = stored(launch, backend.submit(launch))
    update = wait_for(
        lambda: (
            (u := backend.refresh([job])[job.id]).state_reason
            and "Insufficient" in u.state_reason
            and u
        )
    )
    assert update.state is JobState.PENDING
    assert "Unschedulable" in update.state_reason
    assert any("FailedScheduling" in event for event in update.events or [])
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
    assert update.data and update.data["kind"] == "HyperPodPyTorchJob"
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
        launch = make_launch(fs_root, f"batch{index}", nodes=2, env={"FAKE_STEPS": "1"})
        jobs.append(stored(launch, backend.submit(launch)))
    for job in jobs:
        wait_state(backend, job, JobState.SUCCEEDED)
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
        update.state is JobState.SUCCEEDED and len(update.ranks or []) == 2
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
    wait_state(backend, job, JobState.SUCCEEDED)
    for rank, reader in enumerate(readers):
        worker = rank // 3
        text = follow_until(reader, f"rank {rank}/6 step 2")
        lines = text.splitlines()
        expected = [f"rank {rank}/6 step {s}" for s in range(3)]
        if rank % 3 == 0:
            # torchrun's own unprefixed lines go to the pod's first rank.
            assert lines[0].startswith("W1130 torch/distributed/run.py")
            lines = [line for line in lines if not line.startswith("W1130")]
        assert lines[:3] == expected, (rank, worker, text)
        reader.close()
    with pytest.raises(NotFound):
        backend.log_reader(job, 6)


def test_a_late_reader_gets_the_log_from_before_the_restart(
    backend: KubernetesOrchestrator, fs_root: Path
) -> None:
    launch = make_launch(
        fs_root,
        "late",
        nodes=2,
        auto_resume=True,
        max_retries=3,
        env={"FAKE_RESTART_RANK": "0", "FAKE_STEPS": "40", "FAKE_STEP_SECONDS": "0.05"},
    )
    job = stored(launch, backend.submit(launch))
    wait_for(lambda: (u := backend.refresh([job])[job.id]).ranks and u.ranks[0].restarts == 1)
    reader = backend.log_reader(job, 0)
    lines = follow_until(reader, "rank 0/2 done", timeout=30).splitlines()
    crash = lines.index("rank 0/2 NCCL error: unhandled system error")
    assert lines[:crash] == [f"rank 0/2 step {s} loss {1.0 / (s + 1):.4f}" for s in range(21)]
    assert lines[crash + 1].startswith("[jupyter-hyperpod] worker 0 restarted")
    assert lines[crash + 2] == "rank 0/2 resumed from checkpoint at step 20"
    reader.close()
