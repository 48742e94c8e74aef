"""The job feed (#25 item 1): what the tracker sees, pushed over one authenticated WebSocket,
numbered, resumable with `since`, a `resync` when the ring no longer holds it; only my jobs."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError
from tornado.websocket import websocket_connect

from jupyter_hyperpod.core.errors import NotFound
from jupyter_hyperpod.core.feed import FeedEvent, JobFeed
from jupyter_hyperpod.core.models import Job, JobList, JobSpec, JobState

from .helpers import Api


async def _connect(jp_ws_fetch: Any, **params: Any) -> Any:
    return await jp_ws_fetch(
        "hyperpod", "api", "feed", params={k: str(v) for k, v in params.items()}
    )


async def _frames(ws: Any, until: Any, timeout: float = 30) -> list[dict[str, Any]]:
    """Frames (validated as FeedEvent) until `until(frame)` is true."""
    frames: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        message = await asyncio.wait_for(ws.read_message(), max(0.1, deadline - time.monotonic()))
        assert message is not None, f"the feed closed after {frames}"
        FeedEvent.model_validate_json(message)
        frame = json.loads(message)
        frames.append(frame)
        if until(frame):
            return frames


def _ended(job_id: str) -> Any:
    return lambda f: f["type"] == "job" and f["id"] == job_id and f["job"]["state"] == "SUCCEEDED"


async def test_a_job_is_pushed_from_submit_to_its_end_and_resumed_with_since(
    api: Api, jp_ws_fetch: Any, partition: Path
) -> None:
    (partition / "train.py").write_text("import time\nprint('step 1/2')\ntime.sleep(1.5)\n")
    ws = await _connect(jp_ws_fetch)
    hello = await _frames(ws, lambda f: True)
    assert hello[0]["type"] == "hello"
    epoch, start = hello[0]["epoch"], hello[0]["seq"]
    job = await api.submit({"name": "pushed", "command": [sys.executable, "train.py"]})
    frames = await _frames(ws, _ended(job["id"]))
    frames += await _frames(ws, lambda f: f["type"] == "queue")  # published after the job
    ws.close()

    seqs = [f["seq"] for f in frames if f["type"] != "heartbeat"]
    assert seqs == list(range(start + 1, start + 1 + len(seqs))), seqs  # no gap, no repeat
    states = [f["job"]["state"] for f in frames if f["type"] == "job" and f["id"] == job["id"]]
    assert states[0] in ("PENDING", "RUNNING") and states[-1] == "SUCCEEDED", states
    assert "RUNNING" in states
    running = next(f for f in frames if f["type"] == "job" and f["job"]["state"] == "RUNNING")
    assert running["job"]["started"] is not None  # the panel's clock ticks from it
    assert running["job"]["ranks"], running["job"]  # per-rank states travel with the job
    queue = [f["counts"] for f in frames if f["type"] == "queue"]
    assert {"PENDING": 0, "RUNNING": 1} in queue and queue[-1] == {"PENDING": 0, "RUNNING": 0}

    # Reconnect from the middle: exactly the events after it, the same text.
    middle = seqs[len(seqs) // 2 - 1]
    again = await _connect(jp_ws_fetch, since=middle, epoch=epoch)
    resumed = await _frames(again, lambda f: f["type"] != "hello" and f["seq"] == seqs[-1])
    again.close()
    assert resumed[0]["type"] == "hello"
    assert [f["seq"] for f in resumed[1:]] == [s for s in seqs if s > middle]
    assert resumed[1:] == [f for f in frames if f["type"] != "heartbeat" and f["seq"] > middle]

    # A seq of another process's numbering: one resync, then the feed goes on.
    other = await _connect(jp_ws_fetch, since=middle, epoch="another-process")
    got = await _frames(other, lambda f: f["type"] == "resync")
    other.close()
    assert got[-1]["seq"] == seqs[-1] and "restarted" in got[-1]["reason"]


async def test_another_users_running_job_is_not_delivered(
    api: Api, jp_ws_fetch: Any, jp_serverapp: Any, partition: Path
) -> None:
    service = jp_serverapp.web_app.settings["hyperpod_service"]
    bob = Job(
        id="bobs-000001",
        name="bobs",
        user="bob",
        orchestrator="local",
        state=JobState.RUNNING,
        created=time.time(),
        started=time.time(),
        spec=JobSpec(name="bobs", command=["train.py"]),
    )
    service.store.insert(bob, service.cluster_name, {})
    (partition / "mine.py").write_text("print('mine')\n")
    ws = await _connect(jp_ws_fetch)
    job = await api.submit({"name": "mine", "command": [sys.executable, "mine.py"]})
    frames = await _frames(ws, _ended(job["id"]))
    ws.close()
    ids = {f["id"] for f in frames if "id" in f}
    assert ids == {job["id"]}, ids
    assert all(f["counts"]["RUNNING"] <= 1 for f in frames if f["type"] == "queue")


async def test_the_feed_refuses_no_token_and_a_bad_since(
    http_server_client: Any, jp_base_url: str, jp_ws_fetch: Any
) -> None:
    port = http_server_client.get_http_port()
    with pytest.raises(HTTPClientError) as caught:
        await websocket_connect(f"ws://127.0.0.1:{port}{jp_base_url}hyperpod/api/feed")
    assert caught.value.code == 403
    with pytest.raises(HTTPClientError) as caught:
        await _connect(jp_ws_fetch, since="soon")
    assert caught.value.code == 400
    body = json.loads(caught.value.response.body)
    assert body["error"]["field"] == "since" and "whole number" in body["error"]["message"]


def _job(job_id: str, state: JobState, step: int = 0) -> Job:
    return Job(
        id=job_id,
        name="train",
        user="alice",
        orchestrator="local",
        state=state,
        created=1.0,
        events=[f"step {step}"],
        spec=JobSpec(name="train", command=["train.py"]),
    )


def test_the_ring_keeps_capacity_events_and_asks_older_clients_to_resync() -> None:
    gone: set[str] = set()
    finished: dict[str, Job] = {}

    def get(job_id: str) -> Job:
        if job_id in gone:
            raise NotFound(f"no job {job_id}")
        return finished[job_id]

    feed = JobFeed(lambda: JobList(jobs=[], total=0), get, capacity=4)
    assert feed.observe([_job("a", JobState.RUNNING)]) == 2  # the job and the queue counts
    assert feed.observe([_job("a", JobState.RUNNING)]) == 0  # nothing changed: nothing sent
    for step in range(1, 4):
        assert feed.observe([_job("a", JobState.RUNNING, step)]) == 1
    assert feed.seq == 5
    kept = feed.since(1)
    assert [seq for seq, _ in kept] == [2, 3, 4, 5]
    assert json.loads(kept[-1][1])["job"]["events"] == ["step 3"]
    assert feed.since(5) == []
    resync = json.loads(feed.since(0)[0][1])
    assert resync["type"] == "resync" and "no longer held" in resync["reason"]
    assert json.loads(feed.since(99)[0][1])["type"] == "resync"

    finished["a"] = _job("a", JobState.SUCCEEDED, 3)  # left the unfinished list: read once
    assert feed.observe([_job("b", JobState.PENDING)]) == 3
    kinds = [json.loads(text) for _, text in feed.since(5)]
    assert [(k["type"], k.get("id")) for k in kinds] == [
        ("job", "b"),
        ("job", "a"),
        ("queue", None),
    ]
    assert kinds[1]["job"]["state"] == "SUCCEEDED"
    assert kinds[2]["counts"] == {"PENDING": 1, "RUNNING": 0}
    gone.add("b")
    assert feed.observe([]) == 2
    assert [json.loads(t)["type"] for _, t in feed.since(8)] == ["removed", "queue"]


def test_nothing_is_read_while_nobody_listens() -> None:
    reads: list[int] = []

    def read() -> JobList:
        reads.append(1)
        return JobList(jobs=[_job("a", JobState.RUNNING)], total=1)

    feed = JobFeed(read, lambda job_id: _job(job_id, JobState.SUCCEEDED))
    feed.on_refresh()
    assert reads == [] and feed.seq == 0
    woken: list[int] = []
    unsubscribe = feed.subscribe(lambda: woken.append(feed.seq))
    feed.on_refresh()
    assert reads == [1] and woken == [2]
    unsubscribe()
    feed.on_refresh()
    assert reads == [1]
