"""The job journey on the local backend, through the real server: submit, follow, cancel, fail."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from .helpers import Api, log_text

RANK_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    for step in range(int(sys.argv[1])):
        print(f"rank {rank}/{world} local {os.environ['LOCAL_RANK']} master "
              f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} step {step}", flush=True)
        if os.environ.get("FAIL_RANK") == str(rank):
            sys.exit(3)
        time.sleep(float(sys.argv[2]))
    """
)


@pytest.fixture
def script(partition: Path) -> Path:
    project = partition / "project"
    project.mkdir()
    path = project / "ranks.py"
    path.write_text(RANK_SCRIPT)
    return path


def spec(name: str, *args: str, procs: int = 2, env: dict[str, str] | None = None) -> dict:
    return {
        "name": name,
        "command": ["ranks.py", *args],
        "workdir": "project",
        "procs_per_node": procs,
        "env": env or {},
    }


async def test_submit_follow_until_the_job_ends(api: Api, script: Path) -> None:
    job = await api.submit(spec("hello", "5", "0.05"))
    assert job["state"] in ("PENDING", "RUNNING")
    assert job["id"].startswith("hello-")

    frames, ws = await api.follow(job["id"], rank="all")

    assert frames[0]["type"] == "status"
    for rank in (0, 1):
        lines = log_text(frames, rank).splitlines()
        assert [line.split(" step ")[1] for line in lines] == ["0", "1", "2", "3", "4"]
        assert lines[0].startswith(f"rank {rank}/2 local {rank} master 127.0.0.1:")
    assert frames[-1] == {"type": "end", "state": "SUCCEEDED", "exit_code": 0}
    assert ws.close_code == 1000 and ws.close_reason == "job SUCCEEDED"

    final = (await api.get(f"jobs/{job['id']}")).body
    assert final["state"] == "SUCCEEDED" and final["exit_code"] == 0
    assert [r["exit_code"] for r in final["ranks"]] == [0, 0]
    assert final["started"] <= final["ended"]
    assert Path(final["ranks"][1]["log"]).read_text().count("\n") == 5


async def test_a_failing_rank_fails_the_job_and_stops_the_others(api: Api, script: Path) -> None:
    job = await api.submit(spec("fails", "1000", "0.2", procs=3, env={"FAIL_RANK": "1"}))

    failed = await api.wait_for(job["id"], {"FAILED", "SUCCEEDED"}, timeout=30)

    assert failed["state"] == "FAILED" and failed["exit_code"] == 3
    assert failed["state_reason"] == "rank 1 exited with code 3"
    codes = {r["rank"]: r["exit_code"] for r in failed["ranks"]}
    assert codes[1] == 3 and codes[0] == codes[2] == 128 + 15  # stopped by SIGTERM
    # Each rank's end as the runner saw it: rank 1 first, the ranks it stopped after it.
    ended = {r["rank"]: r["ended"] for r in failed["ranks"]}
    assert ended[1] is not None and ended[1] <= min(ended[0], ended[2]) <= failed["ended"]
    assert _group(int(failed["backend_id"])) == []


async def test_cancel_leaves_no_process(api: Api, script: Path, partition: Path) -> None:
    job = await api.submit(spec("long", "1000", "0.1", procs=3))
    running = await api.wait_for(job["id"], {"RUNNING"})
    pgid = int(running["backend_id"])
    deadline = time.monotonic() + 10
    while len(_group(pgid)) < 4 and time.monotonic() < deadline:  # supervisor + 3 ranks
        time.sleep(0.05)
    assert len(_group(pgid)) == 4

    reply = await api.delete(f"jobs/{job['id']}")

    assert reply.status == 200 and reply.body["state"] == "CANCELLED"
    assert _group(pgid) == []
    assert (await api.get(f"jobs/{job['id']}")).body["state"] == "CANCELLED"


def _group(pgid: int) -> list[int]:
    members = []
    for process in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(process.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return members
