"""The job store's read path: a read never waits for a write, and a row read again is reused
without being shared."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.core.models import Job, JobSpec, JobState
from jupyter_hyperpod.core.store import JobStore

from .helpers import Api


def a_job(job_id: str, created: float) -> Job:
    return Job(
        id=job_id,
        name="train",
        user="alice",
        orchestrator="local",
        state=JobState.PENDING,
        created=created,
        spec=JobSpec(name="train", command=["train.py"]),
    )


def test_a_read_is_answered_while_a_write_waits_for_another_process(tmp_path: Path) -> None:
    """Another process holds the write lock (a claim of a second server, a CLI's submit): this
    process's claim waits for it, holding the store's write connection; a GET jobs meanwhile
    reads the last committed rows at once (its own connection, WAL) instead of queueing."""
    store = JobStore(tmp_path / "jobs.sqlite")
    store.insert(a_job("train-000001", 1.0), "local", {"job_dir": "/x"})
    other = sqlite3.connect(tmp_path / "jobs.sqlite", isolation_level=None, timeout=30)
    other.execute("BEGIN IMMEDIATE")
    other.execute("UPDATE jobs SET state_reason = 'uncommitted'")
    claim = threading.Thread(
        target=store.claim_start,
        args=("train-000001", "me"),
        kwargs={"orchestrator": "local", "cluster": "local", "limit": 1},
    )
    claim.start()
    try:
        deadline = time.monotonic() + 20
        while not store._lock.locked():  # the claim holds the write connection, waiting
            assert time.monotonic() < deadline and claim.is_alive()
            time.sleep(0.01)
        found: list[tuple[list[tuple[Job, str, dict[str, Any]]], int]] = []
        reader = threading.Thread(
            target=lambda: found.append(
                store.query(orchestrator="local", cluster="local", user="alice")
            )
        )
        reader.start()
        reader.join(timeout=20)
        assert not reader.is_alive(), "the read waited for the write"
        assert claim.is_alive(), "the claim did not wait for the other process"
        rows, total = found[0]
        assert total == 1 and rows[0][0].state_reason is None  # the last committed row
    finally:
        other.execute("ROLLBACK")
        other.close()
        claim.join(timeout=60)
    claimed = store.get("train-000001")
    assert claimed is not None and claimed[0].state == JobState.RUNNING
    store.close()


def test_a_row_read_again_is_reused_but_never_shared(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    store.insert(a_job("train-000002", 2.0), "local", {"job_dir": "/y"})
    first = store.get("train-000002")
    assert first is not None
    first[0].name = "changed by a caller"
    first[2]["job_dir"] = "/changed"
    again = store.get("train-000002")
    assert again is not None and again[0].name == "train" and again[2] == {"job_dir": "/y"}
    assert again[0].spec is first[0].spec  # parsed and validated once
    store.update("train-000002", state=JobState.FAILED, data={"job_dir": "/z"})
    changed = store.get("train-000002")
    assert changed is not None and changed[0].state == JobState.FAILED
    assert changed[2] == {"job_dir": "/z"}
    store.close()


def test_a_total_is_counted_again_after_any_commit_and_only_then(tmp_path: Path) -> None:
    """A list poll reuses its total while nothing was written; a write of this process or of
    another process (another server on the same store) counts again; the state filter uses its
    own index, never a scan of the table."""
    path = tmp_path / "jobs.sqlite"
    store = JobStore(path)
    scope = {"orchestrator": "local", "cluster": "local", "user": "alice"}
    for i in range(5):
        store.insert(a_job(f"train-{i:06d}", float(i)), "local", {})
    assert store.query(**scope, limit=2)[1] == 5
    counted: list[str] = []
    store._reader().set_trace_callback(counted.append)
    assert store.query(**scope, limit=2)[1] == 5
    assert not [sql for sql in counted if "COUNT(*)" in sql]  # nothing written: not counted
    store.insert(a_job("train-000005", 5.0), "local", {})  # this process's writer
    assert store.query(**scope, limit=2)[1] == 6
    other = sqlite3.connect(path, isolation_level=None)  # another process's write
    other.execute("UPDATE jobs SET state = 'FAILED' WHERE id = 'train-000001'")
    assert store.query(**scope, states=[JobState.FAILED], limit=2)[1] == 1
    other.execute("DELETE FROM jobs WHERE id = 'train-000002'")
    assert store.query(**scope, limit=2)[1] == 5
    plan = other.execute(
        "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM jobs WHERE orchestrator = 'local' AND "
        "cluster = 'local' AND user = 'alice' AND state IN ('FAILED')"
    ).fetchall()
    assert "COVERING INDEX jobs_by_scope_state" in str(plan), plan
    other.close()
    store.close()


async def test_status_reads_are_answered_on_the_loop_once_the_tracker_has_looked(
    api: Api, jp_serverapp: Any, partition: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the first refresh a read may wait for it: it goes to the API pool. After it, a
    read never waits (store and caches only): it is answered on the server's loop, no thread hop."""
    service = jp_serverapp.web_app.settings["hyperpod_service"]
    (partition / "quick.py").write_text("print('hi')\n")
    job = await api.submit({"name": "quick", "command": ["quick.py"]})
    assert service.tracker.wait_first(30)
    threads: list[str] = []
    for name in ("jobs", "job"):
        original = getattr(service, name)

        def recorded(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            threads.append(threading.current_thread().name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(service, name, recorded)
    loop_thread = threading.current_thread().name
    assert (await api.get("jobs")).status == 200
    assert (await api.get(f"jobs/{job['id']}")).status == 200
    assert threads == [loop_thread, loop_thread]
    # The tracker's thread asks the cluster's name too (the watchdog's look at running jobs):
    # stopped, it cannot learn the name back between the reset below and the read.
    service.tracker.stop()
    monkeypatch.setattr(service.connection, "name", None)  # not asked of the backend yet
    threads.clear()
    assert (await api.get("jobs")).status == 200  # the backend is asked its name: not here
    assert len(threads) == 1 and threads[0].startswith("hyperpod-api")
    monkeypatch.setattr(service.tracker, "_first_done", threading.Event())  # as just started
    threads.clear()
    assert (await api.get("jobs")).status == 200
    assert len(threads) == 1 and threads[0].startswith("hyperpod-api")
