"""The shared answer of GET gpu/nodes (gpu/snapshot.py): one load for every poller, the last answer
served at once while the next loads, nothing loaded while nobody asks. A hand-moved clock and
events, no sleeps: nothing here depends on how fast the machine is."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from jupyter_hyperpod.gpu.snapshot import Snapshot

from .conftest import wait_until

WAIT = 30.0  # generous: only a broken Snapshot ever waits this long


class Loads:
    """A load that counts its calls and, when `gate` is cleared, waits until it is set."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.done = threading.Event()
        self.fail: Exception | None = None
        self.lock = threading.Lock()

    def __call__(self) -> int:
        with self.lock:
            self.calls += 1
            number = self.calls
        self.started.set()
        assert self.gate.wait(WAIT)
        try:
            if self.fail is not None:
                raise self.fail
            return number
        finally:
            self.done.set()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_load_serves_every_caller_while_fresh() -> None:
    loads, clock = Loads(), Clock()
    snapshot = Snapshot(loads, fresh=5, clock=clock)
    assert [snapshot.get() for _ in range(10)] == [1] * 10
    clock.now += 4.9
    assert snapshot.get() == 1 and loads.calls == 1


def test_an_older_answer_comes_at_once_while_the_next_one_loads() -> None:
    loads, clock = Loads(), Clock()
    snapshot = Snapshot(loads, fresh=5, stale=30, clock=clock)
    assert snapshot.get() == 1
    clock.now += 6
    loads.gate.clear()
    loads.started.clear()
    loads.done.clear()
    assert snapshot.get() == 1  # not waiting for the load that started
    assert loads.started.wait(WAIT)
    assert snapshot.get() == 1 and loads.calls == 2  # still one load in flight, not three
    loads.gate.set()
    # The loader thread stores its answer right after the load returns.
    wait_until(lambda: snapshot.get() == 2, timeout=WAIT, what="the new answer")
    assert loads.calls == 2


def test_too_old_or_no_answer_waits_for_one_load_for_all() -> None:
    loads, clock = Loads(), Clock()
    snapshot = Snapshot(loads, fresh=5, stale=30, clock=clock)
    loads.gate.clear()
    with ThreadPoolExecutor(8) as pool:
        waiting = [pool.submit(snapshot.get) for _ in range(8)]
        assert loads.started.wait(WAIT)
        loads.gate.set()
        assert [future.result(WAIT) for future in waiting] == [1] * 8
    assert loads.calls == 1
    clock.now += 31  # past `stale`: the next caller waits for a new answer
    assert snapshot.get() == 2


def test_a_failed_load_reaches_the_waiting_callers_and_the_next_get_tries_again() -> None:
    loads, clock = Loads(), Clock()
    snapshot = Snapshot(loads, fresh=5, stale=30, clock=clock)
    loads.fail = RuntimeError("prometheus away")
    with pytest.raises(RuntimeError, match="prometheus away"):
        snapshot.get()
    loads.fail = None
    assert snapshot.get() == 2


def test_no_cache_asks_every_time_and_nothing_runs_unasked() -> None:
    loads = Loads()
    snapshot = Snapshot(loads, fresh=0)
    assert [snapshot.get() for _ in range(3)] == [1, 2, 3]
    idle = Snapshot(Loads(), fresh=5)
    assert idle._loading is None  # no background work before the first caller
