"""The thread that ends stalled Slurm commands (backends/slurm/watch.py), with real processes."""

from __future__ import annotations

import subprocess
import time

from jupyter_hyperpod.backends.slurm.watch import CommandWatch


def sleeper(seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", str(seconds)], stdout=subprocess.PIPE)


def ended_within(process: subprocess.Popen[bytes], seconds: float) -> float:
    started = time.monotonic()
    process.communicate(timeout=seconds)
    return time.monotonic() - started


def test_a_command_that_ends_in_time_is_left_alone() -> None:
    watch = CommandWatch()
    process = sleeper(0.05)
    watched = watch.watch(process, limit=0.5, limit_message="late")
    process.communicate()
    watched.finish()
    assert process.returncode == 0 and watched.stopped_because is None
    time.sleep(0.6)
    assert watch.pending == 0 and watched.stopped_because is None


def test_a_stalled_command_is_stopped_when_its_check_gives_a_reason() -> None:
    watch = CommandWatch()
    process = sleeper(30)
    checks: list[float] = []

    def down() -> str:
        checks.append(time.monotonic())
        return "controller down"

    watched = watch.watch(process, limit=10, limit_message="late", stall=0.2, on_stall=down)
    assert ended_within(process, 2) < 1
    assert watched.stopped_because == "controller down" and len(checks) == 1
    assert process.returncode == -9


def test_a_stalled_command_whose_check_passes_runs_to_its_limit() -> None:
    watch = CommandWatch()
    process = sleeper(30)
    checks: list[str] = []
    watched = watch.watch(
        process, limit=0.6, limit_message="late", stall=0.1, on_stall=lambda: checks.append("x")
    )
    assert 0.4 < ended_within(process, 3) < 1.5
    assert watched.stopped_because == "late" and checks == ["x"]


def test_an_earlier_deadline_wakes_the_thread_and_a_later_one_keeps_its_turn() -> None:
    watch = CommandWatch()
    slow, fast = sleeper(30), sleeper(30)
    slow_watch = watch.watch(slow, limit=1.0, limit_message="slow")
    fast_watch = watch.watch(fast, limit=0.1, limit_message="fast")
    assert ended_within(fast, 2) < 0.6 and fast_watch.stopped_because == "fast"
    assert slow.poll() is None and slow_watch.stopped_because is None
    assert ended_within(slow, 3) < 1.5 and slow_watch.stopped_because == "slow"


def test_the_thread_ends_when_idle_and_comes_back_for_the_next_command() -> None:
    watch = CommandWatch(idle_seconds=0.2, name="watch-under-test")

    def running() -> bool:
        import threading

        return any(thread.name == "watch-under-test" for thread in threading.enumerate())

    first = sleeper(30)
    watch.watch(first, limit=0.1, limit_message="first")
    first.communicate(timeout=2)
    deadline = time.monotonic() + 3
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running()
    second = sleeper(30)
    watched = watch.watch(second, limit=0.1, limit_message="second")
    assert ended_within(second, 2) < 1 and watched.stopped_because == "second"
