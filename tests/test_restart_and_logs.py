"""History across server restarts, and the log stream's promises: resume, wait, heartbeat, tail."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.core.models import JobState
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings

from .helpers import Api, log_text

COUNTER = """import sys, time
for i in range(int(sys.argv[1])):
    print(f"line {i}", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def counter(partition: Path) -> Path:
    path = partition / "counter.py"
    path.write_text(COUNTER)
    return path


def new_service(hyperpod_config: dict[str, Any]) -> HyperPodService:
    """What a (re)started Jupyter server builds from the same configuration."""
    return HyperPodService(HyperPodSettings(**hyperpod_config))


def wait_state(
    service: HyperPodService, job_id: str, states: set[JobState], timeout: float = 30
) -> Any:
    deadline = time.monotonic() + timeout
    while (job := service.job(job_id)).state not in states:
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
    return job


def test_a_restart_keeps_the_history_and_finds_running_jobs_again(
    hyperpod_config: dict[str, Any], counter: Path
) -> None:
    first = new_service(hyperpod_config)
    done = first.submit({"name": "done", "command": ["counter.py", "2", "0"]})
    wait_state(first, done.id, {JobState.SUCCEEDED})
    running = first.submit({"name": "survivor", "command": ["counter.py", "30", "0.1"]})
    wait_state(first, running.id, {JobState.RUNNING})
    first.close()  # the server stops; the job's process group does not

    second = new_service(hyperpod_config)
    jobs = {job.id: job for job in second.jobs().jobs}
    assert jobs[done.id].state == JobState.SUCCEEDED and jobs[done.id].exit_code == 0
    assert jobs[running.id].state == JobState.RUNNING
    finished = wait_state(second, running.id, {JobState.SUCCEEDED, JobState.FAILED})
    assert finished.state == JobState.SUCCEEDED
    assert second.logs(running.id, rank=0, tail=1).text == "line 29\n"
    second.close()


def test_a_job_whose_supervisor_died_with_the_machine_is_marked_failed(
    hyperpod_config: dict[str, Any], counter: Path
) -> None:
    first = new_service(hyperpod_config)
    job = first.submit({"name": "orphan", "command": ["counter.py", "1000", "0.1"]})
    job = wait_state(first, job.id, {JobState.RUNNING})
    first.close()
    os.killpg(int(job.backend_id), signal.SIGKILL)  # what a reboot does to it
    time.sleep(0.2)

    second = new_service(hyperpod_config)
    found = wait_state(second, job.id, {JobState.FAILED, JobState.CANCELLED})
    assert found.state == JobState.FAILED
    assert "stopped unexpectedly" in (found.state_reason or "")
    second.close()


def test_pending_jobs_wait_for_a_slot_and_start_after_a_restart(
    hyperpod_config: dict[str, Any], counter: Path
) -> None:
    config = {**hyperpod_config, "local_max_parallel_jobs": 1}
    first = new_service(config)
    blocker = first.submit({"name": "blocker", "command": ["counter.py", "10", "0.1"]})
    queued = first.submit({"name": "queued", "command": ["counter.py", "1", "0"]})
    assert queued.state == JobState.PENDING and "waiting for a free slot" in (
        queued.state_reason or ""
    )
    first.close()

    second = new_service(config)
    assert second.job(queued.id).state == JobState.PENDING
    wait_state(second, blocker.id, {JobState.SUCCEEDED})
    assert wait_state(second, queued.id, {JobState.SUCCEEDED}).exit_code == 0
    second.close()


async def test_a_reconnecting_client_loses_and_repeats_nothing(api: Api, counter: Path) -> None:
    job = await api.submit({"name": "resume", "command": ["counter.py", "40", "0.02"]})
    ws = await api._ws_fetch("hyperpod", "api", "jobs", job["id"], "logs", "stream")
    received, offset = "", 0
    while received.count("\n") < 5:
        frame = json.loads(await ws.read_message())
        if frame["type"] == "data":
            received += frame["data"]
            offset = frame["offset"]
    ws.close()  # a network drop

    frames, closed = await api.follow(job["id"], offset=offset)

    received += log_text(frames)
    assert received.splitlines() == [f"line {i}" for i in range(40)]
    assert closed.close_code == 1000


async def test_the_stream_waits_for_a_pending_job_and_sends_heartbeats(
    api: Api, counter: Path, partition: Path
) -> None:
    blockers = [
        await api.submit({"name": f"block{i}", "command": ["counter.py", "25", "0.1"]})
        for i in range(2)
    ]
    job = await api.submit({"name": "later", "command": ["counter.py", "2", "0"]})
    assert job["state"] == "PENDING"

    frames, ws = await api.follow(job["id"], timeout=60)

    kinds = [f["type"] for f in frames]
    states = [f["state"] for f in frames if f["type"] == "status"]
    assert states[:2] == ["PENDING", "RUNNING"]
    assert "heartbeat" in kinds[: kinds.index("data")]  # heartbeats (every 1 s here) while it waits
    assert log_text(frames) == "line 0\nline 1\n"
    assert ws.close_code == 1000 and ws.close_reason == "job SUCCEEDED"
    for blocker in blockers:
        await api.delete(f"jobs/{blocker['id']}")


async def test_a_failed_job_closes_the_stream_saying_so(api: Api, partition: Path) -> None:
    (partition / "crash.py").write_text("import sys\nprint('about to fail')\nsys.exit(7)\n")
    job = await api.submit({"name": "crash", "command": ["crash.py"]})
    frames, ws = await api.follow(job["id"])
    assert frames[-1] == {"type": "end", "state": "FAILED", "exit_code": 7}
    assert ws.close_code == 1000 and ws.close_reason == "job FAILED"


async def test_a_command_that_does_not_exist_fails_clearly(api: Api) -> None:
    job = await api.submit({"name": "typo", "command": ["no-such-program-here"]})
    final = await api.wait_for(job["id"], {"FAILED", "SUCCEEDED"})
    assert final["state"] == "FAILED" and final["exit_code"] == 127
    text = (await api.get(f"jobs/{job['id']}/logs")).body["text"]
    assert "no-such-program-here" in text and "No such file" in text


async def test_tail_and_rank_checks(api: Api, counter: Path) -> None:
    job = await api.submit(
        {"name": "tail", "command": ["counter.py", "500", "0"], "procs_per_node": 2}
    )
    await api.wait_for(job["id"], {"SUCCEEDED"})
    snapshot = (await api.get(f"jobs/{job['id']}/logs", rank=1, tail=3)).body
    assert snapshot["text"] == "line 497\nline 498\nline 499\n"
    assert snapshot["truncated"] and snapshot["offset"] - snapshot["start_offset"] == len(
        snapshot["text"]
    )
    for rank in (2, -1):
        reply = await api.get(f"jobs/{job['id']}/logs", rank=rank)
        assert reply.status == 400 and reply.body["error"]["field"] == "rank"
    reply = await api.get(f"jobs/{job['id']}/logs", tail="lots")
    assert reply.status == 400 and reply.body["error"]["field"] == "tail"


async def test_jobs_list_filters_and_paginates(api: Api, counter: Path) -> None:
    ids = [
        (await api.submit({"name": f"n{i}", "command": ["counter.py", "1", "0"]}))["id"]
        for i in range(3)
    ]
    for job_id in ids:
        await api.wait_for(job_id, {"SUCCEEDED"})
    page = (await api.get("jobs", limit=2)).body
    assert page["total"] == 3 and [j["id"] for j in page["jobs"]] == ids[::-1][:2]
    assert (await api.get("jobs", state="running")).body["total"] == 0
    assert (await api.get("jobs", state="SUCCEEDED,FAILED")).body["total"] == 3
    reply = await api.get("jobs", state="DONE")
    assert reply.status == 400 and reply.body["error"]["field"] == "state"
