"""Submission is all or nothing, and the local queue is shared through the job store: a start
that fails is recorded FAILED and frees its slot; a second process on the same store (a
`--direct` CLI) never starts a job another live process owns, nor exceeds the parallel limit."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from jupyter_hyperpod.backends import local
from jupyter_hyperpod.core.errors import HyperPodError, InvalidRequest
from jupyter_hyperpod.core.models import JobState
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings

from .helpers import Api

COUNTER = """import sys, time
for i in range(int(sys.argv[1])):
    print(f"line {i}", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def config(hyperpod_config: dict[str, Any], partition: Path) -> dict[str, Any]:
    (partition / "counter.py").write_text(COUNTER)
    return {**hyperpod_config, "local_max_parallel_jobs": 1}


def wait_state(service: HyperPodService, job_id: str, states: set[JobState]) -> Any:
    deadline = time.monotonic() + 30
    while (job := service.job(job_id)).state not in states:
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
    return job


def running_count(service: HyperPodService) -> int:
    rows = service.store.everyone(orchestrator="local", cluster=service.cluster_name)
    return sum(1 for job, _, _ in rows if job.state is JobState.RUNNING)


def supervisors(job_dir: Path) -> list[int]:
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if str(job_dir) in (process.info["cmdline"] or []) and (
            process.info["status"] != psutil.STATUS_ZOMBIE
        ):
            found.append(process.pid)
    return found


def failing_popen(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    """The supervisor's start fails once (fault injection into the real local backend)."""
    real = subprocess.Popen
    calls = {"n": 0}

    def popen(*args: Any, **kwargs: Any) -> Any:
        argv = list(args[0]) if args else []
        if argv[:1] == ["git"] or argv[1:3] == ["-m", "pip"]:  # the snapshot's (core/snapshot.py)
            return real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 1:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(local.subprocess, "Popen", popen)


def test_a_start_that_fails_is_failed_with_its_reason_and_frees_its_slot(
    config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = HyperPodService(HyperPodSettings(**config))
    failing_popen(monkeypatch, ValueError("embedded null byte"))  # what Popen says of a NUL
    try:
        failed = service.submit({"name": "unlucky", "command": ["counter.py", "1", "0"]})
        assert failed.state is JobState.FAILED
        assert "could not be started: embedded null byte" in (failed.state_reason or "")
        listed = {job.id: job for job in service.jobs().jobs}
        assert listed[failed.id].state is JobState.FAILED  # tracked, in the history
        # Its slot is free: the next job starts at once (limit 1), nothing waits behind it.
        after = service.submit({"name": "next", "command": ["counter.py", "2", "0"]})
        assert after.state is JobState.RUNNING
        assert wait_state(service, after.id, {JobState.SUCCEEDED}).exit_code == 0
    finally:
        service.close()


def test_a_start_the_system_refuses_leaves_nothing_and_frees_its_slot(
    config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = HyperPodService(HyperPodSettings(**config))
    failing_popen(monkeypatch, OSError(24, "Too many open files"))
    try:
        with pytest.raises(HyperPodError) as refused:
            service.submit({"name": "unlucky", "command": ["counter.py", "1", "0"]})
        assert refused.value.status == 503 and "Too many open files" in refused.value.message
        assert service.jobs().total == 0
        after = service.submit({"name": "next", "command": ["counter.py", "1", "0"]})
        assert after.state is JobState.RUNNING
        wait_state(service, after.id, {JobState.SUCCEEDED})
    finally:
        service.close()


def test_a_lone_surrogate_is_refused_before_anything_starts(config: dict[str, Any]) -> None:
    """The reproduction of issue 14: the local backend ignores `image`, the store cannot take
    it. Today's order (store first) refuses it with a 400 and starts nothing."""
    service = HyperPodService(HyperPodSettings(**config))
    try:
        with pytest.raises(InvalidRequest):
            service.submit(
                {"name": "surrogate", "command": ["counter.py", "1", "0"], "image": "\ud800"}
            )
        assert service.jobs().total == 0
        jobs_dir = service.partition.root / ".hyperpod" / "jobs"
        assert not jobs_dir.exists() or not any(supervisors(d) for d in jobs_dir.iterdir())
        after = service.submit({"name": "next", "command": ["counter.py", "1", "0"]})
        assert after.state is JobState.RUNNING  # the slot (limit 1) was not taken
        wait_state(service, after.id, {JobState.SUCCEEDED})
    finally:
        service.close()


async def test_rest_surrogate_submit_is_4xx_and_the_queue_moves(api: Api, partition: Path) -> None:
    (partition / "counter.py").write_text(COUNTER)
    body = '{"name": "surrogate", "command": ["counter.py", "1", "0"], "image": "\\ud800"}'
    reply = await api.post("jobs", body)
    assert 400 <= reply.status < 500, reply.body
    assert (await api.get("jobs")).body["total"] == 0
    job = await api.submit({"name": "next", "command": ["counter.py", "1", "0"]})
    assert (await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"}))["state"] == "SUCCEEDED"


def test_a_second_process_never_starts_a_job_the_first_owns(
    config: dict[str, Any], partition: Path
) -> None:
    server = HyperPodService(HyperPodSettings(**config))
    direct = HyperPodService(HyperPodSettings(**config))  # e.g. `jupyter hyperpod --direct`
    most = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal most
        while not stop.is_set():
            most = max(most, running_count(server))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        # The blocker holds the one slot until the test says go: however slow this machine
        # is, the server's next job is still waiting while the direct process refreshes.
        (partition / "gate.py").write_text(
            "import pathlib, time\nwhile not pathlib.Path('go').exists():\n    time.sleep(0.05)\n"
        )
        blocker = server.submit({"name": "blocker", "command": ["gate.py"]})
        queued = server.submit({"name": "queued", "command": ["counter.py", "1", "0"]})
        assert blocker.state is JobState.RUNNING and queued.state is JobState.PENDING
        mine = direct.submit({"name": "mine", "command": ["counter.py", "1", "0"]})
        assert mine.state is JobState.PENDING and "queued first" in (mine.state_reason or "")
        reasons = []
        for _ in range(10):  # the direct process refreshes while the server's job waits
            direct.refresh(max_age=0)
            found = direct.store.get(queued.id)
            assert found is not None and found[0].state is JobState.PENDING, found
            reasons.append(found[0].state_reason or "")
            time.sleep(0.05)
        # Read right after the direct process wrote it: the server's own background refresh
        # writes its reason ("waiting for a free slot") too, so the last writer varies.
        assert any("another process" in reason for reason in reasons), reasons
        assert server.store.owner_of(queued.id) == server.owner
        (partition / "go").write_text("")
        wait_state(server, blocker.id, {JobState.SUCCEEDED})
        wait_state(server, queued.id, {JobState.RUNNING, JobState.SUCCEEDED})
        assert server.store.owner_of(queued.id) == server.owner, "the server started its own"
        # The claim (RUNNING, the slot taken) comes before the process exists: the process
        # group id follows as soon as the start returns.
        deadline = time.monotonic() + 10
        while not (started := server.job(queued.id)).backend_id:
            assert time.monotonic() < deadline, started
            time.sleep(0.02)
        wait_state(server, queued.id, {JobState.SUCCEEDED})
        assert wait_state(direct, mine.id, {JobState.SUCCEEDED}).exit_code == 0
        assert direct.store.owner_of(mine.id) == direct.owner
    finally:
        stop.set()
        sampler.join()
        direct.close()
        server.close()
    assert most == 1, "local_max_parallel_jobs was exceeded"


def test_the_jobs_of_a_process_that_is_gone_are_adopted(config: dict[str, Any]) -> None:
    first = HyperPodService(HyperPodSettings(**config))
    blocker = first.submit({"name": "blocker", "command": ["counter.py", "5", "0.1"]})
    queued = first.submit({"name": "queued", "command": ["counter.py", "1", "0"]})
    assert queued.state is JobState.PENDING
    first.close()  # its lease goes with it (a killed process's expires)
    second = HyperPodService(HyperPodSettings(**config))
    try:
        wait_state(second, blocker.id, {JobState.SUCCEEDED})
        assert wait_state(second, queued.id, {JobState.SUCCEEDED}).exit_code == 0
        assert second.store.owner_of(queued.id) == second.owner
    finally:
        second.close()


def test_a_row_being_submitted_is_left_alone_and_one_left_behind_fails(
    config: dict[str, Any],
) -> None:
    from jupyter_hyperpod.core.models import Job, JobSpec

    service = HyperPodService(HyperPodSettings(**config))
    try:

        def half_submitted(name: str, owner: str) -> str:
            """A row as submit stores it before the backend has it (a kill -9 just then)."""
            job = Job(
                id=f"{name}-000000",
                name=name,
                user=service.settings.user,
                orchestrator="local",
                state=JobState.PENDING,
                created=time.time() - 5,
                spec=JobSpec(name=name, command=["counter.py", "1", "0"]),
            )
            service.store.insert(
                job, service.cluster_name, {"mlflow_uri": "sqlite:///x.db"}, owner=owner
            )
            return job.id

        mine = half_submitted("inflight", service.owner)
        gone = half_submitted("orphan", "a-process-that-was-killed")
        service.refresh(max_age=0)
        assert service.tracker.stale is None
        assert service.job(mine).state is JobState.PENDING  # its submit is still under way
        orphan = service.job(gone)
        assert orphan.state is JobState.FAILED and "did not complete" in (orphan.state_reason or "")
        # Neither holds a place in the queue (limit 1, both older): the next job starts at once.
        after = service.submit({"name": "next", "command": ["counter.py", "1", "0"]})
        assert after.state is JobState.RUNNING
        wait_state(service, after.id, {JobState.SUCCEEDED})
    finally:
        service.close()
