"""The backend's one pool of log followers (backends/kubernetes/logs.py), which our jobs and
adopted ones share: one follower a key however many readers, released by the readers, swept once
idle for its linger, stopped on close. Real followers, on a client that is never called (their
pod is never there), so each ends by itself or polls until stopped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.kubernetes.client import KubeClient
from jupyter_hyperpod.backends.kubernetes.logs import FollowerPool, PodLogFollower, SpoolLogReader


def follower(spool: Path, *, over: bool) -> PodLogFollower:
    return PodLogFollower(
        KubeClient(kubeconfig=str(spool.parent / "no-kubeconfig")),
        namespace="team-a",
        container="worker",
        spool=spool,
        find_pod=lambda: None,  # the pod is not there (yet, or any more)
        job_over=lambda: over,
        label="test",
        poll_interval=0.02,
    )


def test_one_follower_a_key_released_by_its_readers_and_swept_when_done(tmp_path: Path) -> None:
    pool = FollowerPool()
    made: list[PodLogFollower] = []

    def make() -> PodLogFollower:
        made.append(follower(pool.spool_dir("job-1", str(tmp_path)) / "worker-0.log", over=True))
        return made[-1]

    first = pool.open(("job-1", 0), make, finished=True)
    assert first.done  # a finished job's log was drained before the reader got it
    second = pool.open(("job-1", 0), make, finished=True)
    assert second is first and len(made) == 1 and first.refs == 2
    assert first.spool == tmp_path / "k8s-logs" / "worker-0.log"

    reader = SpoolLogReader(first, pool.release)
    reader.close()
    reader.close()  # a reader releases once
    assert first.refs == 1
    pool.sweep()
    assert pool.open(("job-1", 0), make, finished=False) is first  # still read: kept
    pool.release(first)
    pool.release(first)
    assert first.refs == 0
    pool.sweep()  # done and nobody reads it: dropped (its spool stays)
    again = pool.open(("job-1", 0), make, finished=False)
    assert again is not first and len(made) == 2
    pool.close()


def test_an_idle_follower_stops_after_its_linger_and_close_stops_the_rest(tmp_path: Path) -> None:
    pool = FollowerPool(linger=0.5)
    waiting = pool.open(
        ("job-2", 0), lambda: follower(tmp_path / "w0.log", over=False), finished=False
    )
    other = pool.open(
        ("job-2", 1), lambda: follower(tmp_path / "w1.log", over=False), finished=False
    )
    assert waiting.alive and other.alive and not waiting.done
    pool.release(waiting)
    pool.sweep()
    assert waiting.alive  # idle for less than its linger
    time.sleep(0.7)
    pool.sweep()
    assert not waiting.alive and other.alive  # the other one is still read
    pool.close()
    assert not other.alive


def test_a_job_without_a_writable_directory_spools_in_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pool = FollowerPool()
    found = pool.spool_dir("job-3", None)
    assert found == tmp_path / "cache" / "jupyter-hyperpod" / "k8s-logs" / "job-3"
    assert found.is_dir() and pool.spool_dir("job-3", str(tmp_path)) == found  # found once
