"""The status tracker (core/tracker.py): readers answer from the store at once, one refresh at a
time runs in the background, a failing backend marks states stale instead of failing reads."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.backends.local import LocalOrchestrator
from jupyter_hyperpod.core.backend import JobUpdate, StoredJob
from jupyter_hyperpod.core.errors import BackendUnavailable
from jupyter_hyperpod.core.models import JobState
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.core.tracker import Tracker


class SlowLocal(LocalOrchestrator):
    """The real local backend with a fault injected into its status query: a delay, or an
    outage (what an unreachable slurmctld or Kubernetes API does to `refresh`)."""

    delay = 0.0
    down: str | None = None
    running = 0
    most = 0

    def refresh(self, jobs: list[StoredJob]) -> dict[str, JobUpdate]:
        type(self).running += 1
        type(self).most = max(type(self).most, type(self).running)
        try:
            time.sleep(self.delay)
            if self.down:
                raise BackendUnavailable(self.down)
            return super().refresh(jobs)
        finally:
            type(self).running -= 1


@pytest.fixture
def service(hyperpod_config: dict[str, Any], partition: Path) -> Any:
    (partition / "wait.py").write_text(
        "import time\ntime.sleep(float(__import__('sys').argv[1]))\n"
    )
    settings = HyperPodSettings(**hyperpod_config)
    SlowLocal.delay, SlowLocal.down, SlowLocal.running, SlowLocal.most = 0.0, None, 0, 0
    made = HyperPodService(settings, SlowLocal(settings=settings))
    yield made
    made.close()


def test_one_refresh_at_a_time_whoever_asks() -> None:
    running, most = 0, 0
    lock = threading.Lock()

    def refresh() -> float | None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return 1.0

    tracker = Tracker(refresh, min_interval=0.01)
    tracker.start()
    threads = [threading.Thread(target=tracker.refresh) for _ in range(8)]
    for thread in threads:
        thread.start()
    for _ in range(20):
        tracker.nudge(now=True)
        time.sleep(0.005)
    for thread in threads:
        thread.join()
    tracker.stop()
    assert most == 1 and tracker.refreshes >= 8


def test_the_interval_follows_the_age_of_the_youngest_job() -> None:
    ages: list[float | None] = [1.0, 10.0, 100.0, None]
    tracker = Tracker(lambda: ages.pop(0), min_interval=2.0, max_interval=30.0)
    seen = []
    for _ in range(4):
        tracker.refresh()
        seen.append(tracker.interval)
    assert seen == [2.0, 5.0, 30.0, 30.0]  # submitit's min(delay, max(2, age / 2))


def test_a_listener_reading_after_a_refresh_does_not_speed_the_tracker_up() -> None:
    """The job feed reads the jobs after each refresh, and a read nudges: were that nudge taken,
    the tracker would refresh every fresh_for while a panel listens (bench_push.py saw 2 a
    second). A reader's nudge from another thread still brings the refresh forward."""
    tracker = Tracker(lambda: 100.0, min_interval=0.05, max_interval=30.0, fresh_for=0.01)
    tracker.add_listener(tracker.nudge)  # what service.jobs() in the feed's read does
    tracker.start()
    try:
        assert tracker.wait_first(5)
        time.sleep(0.5)
        assert tracker.refreshes == 1  # its interval is 30 s: age 100 s / 2, at most 30
        tracker.nudge()  # a reader (this thread): refreshed within fresh_for
        deadline = time.monotonic() + 5
        while tracker.refreshes < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        assert tracker.refreshes == 2
    finally:
        tracker.stop()


def test_readers_nudging_a_pending_refresh_do_not_wake_the_tracker() -> None:
    """Every GET of the jobs nudges; once a refresh is asked for, more nudges change nothing, so
    they do not wake the tracker's thread (each wake handed it the GIL mid-request). The asked
    refresh still comes within fresh_for, and a nudge after it asks again."""
    # The asked refresh is due 1 s after the first: the 50 nudges all come while it is pending.
    tracker = Tracker(lambda: 100.0, min_interval=0.05, max_interval=30.0, fresh_for=1.0)
    tracker.start()
    try:
        assert tracker.wait_first(5)
        time.sleep(0.2)
        wakes = 0
        notify_all = tracker._wake.notify_all

        def counted() -> None:
            nonlocal wakes
            wakes += 1
            notify_all()

        tracker._wake.notify_all = counted  # type: ignore[method-assign]
        for _ in range(50):
            tracker.nudge()
        assert wakes == 1
        deadline = time.monotonic() + 5
        while tracker.refreshes < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tracker.refreshes == 2
        tracker.nudge()
        assert wakes == 2
    finally:
        tracker.stop()


def test_publish_tells_the_listeners_without_a_refresh() -> None:
    """A submit or a cancel changed the store, not the cluster: the feed hears it at once, and
    no status query runs beside the next submit (the Slurm submit bench: an squeue after every
    sbatch)."""
    tracker = Tracker(lambda: 100.0, min_interval=0.05, max_interval=30.0)
    heard = threading.Event()
    tracker.start()
    try:
        assert tracker.wait_first(5)
        time.sleep(0.2)
        tracker.add_listener(heard.set)
        tracker.publish()
        assert heard.wait(2)
        time.sleep(0.3)
        assert tracker.refreshes == 1
    finally:
        tracker.stop()


def test_while_watched_it_refreshes_every_min_interval() -> None:
    """A panel follows the feed: states move at the tracker's fastest pace (refresh_interval),
    not at the pace of the jobs' age (30 s for old ones); nobody following: the age's again."""
    tracker = Tracker(lambda: 100.0, min_interval=0.05, max_interval=30.0)
    watching = True
    tracker.watched = lambda: watching
    tracker.start()
    try:
        time.sleep(0.6)
        fast = tracker.refreshes
        assert 6 <= fast <= 13, fast  # every 0.05 s, on a shared machine
        watching = False
        time.sleep(0.1)  # the refresh already due
        settled = tracker.refreshes
        time.sleep(0.5)
        assert tracker.refreshes == settled
    finally:
        tracker.stop()


def test_a_failing_backend_marks_states_stale_and_backs_off() -> None:
    outcome: list[Exception | None] = [BackendUnavailable("slurmctld is not answering"), None]

    def refresh() -> float | None:
        error = outcome.pop(0)
        if error:
            raise error
        return 4.0

    tracker = Tracker(refresh, min_interval=1.0)
    tracker.refresh()
    assert tracker.stale is not None and tracker.stale.reason == "slurmctld is not answering"
    assert tracker.interval == 2.0
    tracker.refresh()
    assert tracker.stale is None and tracker.interval == 2.0


def test_reads_do_not_wait_for_a_slow_refresh(service: HyperPodService) -> None:
    job = service.submit({"name": "slow", "command": ["wait.py", "30"]})
    SlowLocal.delay = 3.0
    service.tracker.nudge(now=True)
    deadline = time.monotonic() + 5
    while SlowLocal.running == 0:  # the slow refresh is under way
        assert time.monotonic() < deadline
        time.sleep(0.01)
    started = time.monotonic()
    for _ in range(20):
        assert service.job(job.id).state is JobState.RUNNING
        assert service.jobs().total == 1
    assert time.monotonic() - started < 1.0, "reads answered from the store"
    assert SlowLocal.most == 1
    SlowLocal.delay = 0.0
    service.cancel(job.id)


def test_an_outage_marks_states_stale_and_recovers(service: HyperPodService) -> None:
    job = service.submit({"name": "outage", "command": ["wait.py", "1"]})
    SlowLocal.down = "the cluster's API server is unreachable (test)"
    service.refresh(max_age=0)
    listed = service.jobs()
    assert listed.stale_reason == SlowLocal.down and listed.stale_since
    read = service.job(job.id)
    assert read.state is JobState.RUNNING and read.stale_reason == SlowLocal.down
    time.sleep(1.5)  # the job ends while the backend is away
    SlowLocal.down = None
    deadline = time.monotonic() + 20
    # Recovered: the job's end is seen and the list is no longer stale (the job's record is
    # written before the refresh that wrote it clears the list's mark: wait for both).
    while (read := service.job(job.id)).state is not JobState.SUCCEEDED or (
        service.jobs().stale_reason is not None
    ):
        assert time.monotonic() < deadline, (read, service.jobs().stale_reason)
        time.sleep(0.05)
    assert read.stale_reason is None
