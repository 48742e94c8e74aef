"""A job being handed to the cluster: stored, and the backend's answer not yet recorded (a held
job's release, any submit). Its log reads as empty, a cancel waits for the answer and cancels it
there, and one left behind by a server that stopped in between fails with why."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.backends.local import LocalOrchestrator
from jupyter_hyperpod.core.backend import JobUpdate, Launch
from jupyter_hyperpod.core.jobbook import LEFT_BEHIND
from jupyter_hyperpod.core.models import Job, JobSpec, JobState
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings


class GatedLocal(LocalOrchestrator):
    """The real local backend, whose submit waits for `start_gate` when it is set (a cluster
    slow to take a job): the hand-over stays open while the test looks."""

    start_gate: threading.Event | None = None
    submitting = threading.Event()

    def submit(self, launch: Launch) -> JobUpdate:
        type(self).submitting.set()
        if self.start_gate is not None:
            assert self.start_gate.wait(20)
        return super().submit(launch)


@pytest.fixture
def service(hyperpod_config: dict[str, Any], partition: Path) -> Iterator[HyperPodService]:
    (partition / "wait.py").write_text(
        "import time\ntime.sleep(float(__import__('sys').argv[1]))\n"
    )
    settings = HyperPodSettings(**hyperpod_config)
    GatedLocal.start_gate, GatedLocal.submitting = None, threading.Event()
    made = HyperPodService(settings, GatedLocal(settings=settings))
    yield made
    if GatedLocal.start_gate is not None:
        GatedLocal.start_gate.set()  # a test that failed with the hand-over open
    made.close()


def test_a_held_jobs_log_reads_empty_while_its_release_is_under_way(
    service: HyperPodService, partition: Path
) -> None:
    """Between the claim of its hold and the backend's answer, a released job is neither held
    nor placed: its log reads as empty then (not a server error), and as its file after."""
    (partition / "hello.py").write_text("print('hello after the release')\n")
    first = service.submit({"name": "first", "command": ["wait.py", "0.5"]})
    second = service.submit({"name": "second", "command": ["hello.py"], "after": [first.id]})
    assert second.held is not None
    service.store.update(second.id, owner="a-server-that-stopped")  # stored by another server
    reader = service.log_reader(second.id, 0)
    try:
        assert reader.read(0, 100) == b""
        GatedLocal.start_gate, GatedLocal.submitting = threading.Event(), threading.Event()
        assert GatedLocal.submitting.wait(20), "the second job was never released"
        record = service.job(second.id)
        assert record.held is None and record.backend_id is None  # the window
        # Its release is this server's now, whoever stored it: not a start left behind.
        assert service.store.owner_of(second.id) == service.owner
        assert not service.book.left_behind(*service.book.get(second.id))
        assert reader.read(0, 100) == b""
        assert reader.size() == 0
        assert service.logs(second.id, tail=10).text == ""  # a reader opened in the window
        GatedLocal.start_gate.set()
        deadline = time.monotonic() + 20
        while not service.job(second.id).state.finished:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert reader.read(0, 100) == b"hello after the release\n"
    finally:
        reader.close()


def test_a_cancel_while_a_held_job_is_being_started_cancels_it_on_the_cluster(
    service: HyperPodService,
) -> None:
    """The cancel waits for the backend's answer, then cancels the job there: it does not
    answer 500, and the job does not go on running."""
    first = service.submit({"name": "first", "command": ["wait.py", "0.5"]})
    second = service.submit({"name": "second", "command": ["wait.py", "60"], "after": [first.id]})
    GatedLocal.start_gate, GatedLocal.submitting = threading.Event(), threading.Event()
    assert GatedLocal.submitting.wait(20), "the second job was never released"
    cancelled: list[Any] = []
    cancelling = threading.Thread(target=lambda: cancelled.append(service.cancel(second.id)))
    cancelling.start()
    time.sleep(0.3)
    assert cancelling.is_alive(), "the cancel waits for the backend's answer"
    GatedLocal.start_gate.set()
    cancelling.join(20)
    assert cancelled and cancelled[0].state is JobState.CANCELLED, cancelled
    group = int(cancelled[0].backend_id)  # the local backend's id: the process group
    deadline = time.monotonic() + 20
    while _group_alive(group):
        assert time.monotonic() < deadline, "the cancelled job's processes still run"
        time.sleep(0.1)
    assert service.job(second.id).state is JobState.CANCELLED


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_start_left_behind_by_a_stopped_server_fails_and_cancels_at_once(
    service: HyperPodService,
) -> None:
    """A record stored and never handed to the cluster by a server that stopped (killed between
    the two): a cancel does not wait for it, and the job says what happened."""
    job = Job(
        id="orphan-0a1b2c",
        name="orphan",
        user=service.settings.user,
        orchestrator="local",
        state=JobState.PENDING,
        created=time.time() - 5,
        spec=JobSpec(name="orphan", command=["wait.py", "1"]),
    )
    service.tracker.stop()  # the cancel finds it out itself (the tracker's refresh does too)
    service.store.insert(job, service.cluster_name, {}, owner="a-server-that-stopped")
    started = time.monotonic()
    cancelled = service.cancel(job.id)
    assert time.monotonic() - started < 5
    assert cancelled.state is JobState.FAILED
    assert cancelled.state_reason == LEFT_BEHIND
