"""Sweeps on the local backend through the real server (#24 items 3 and 5): a 2x2 grid with a
concurrency cap of 2 never runs more than 2 members at once and finishes all 4; the group row
counts them and names the best member; bulk cancel; hostile input (10,000 points, a parameter the
template lacks, a value of the wrong type) is refused naming the limit or the field and creates
nothing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.core.sweeps import (
    SweepRequest,
    count_points,
    expand,
    member_names,
    value_text,
)

from .helpers import Api

WINDOW = """\
import sys, time
start = time.time()
time.sleep(float(sys.argv[2]))
print(f"window {sys.argv[1]} {start:.6f} {time.time():.6f}", flush=True)
"""


@pytest.fixture
def hyperpod_config(hyperpod_config: dict[str, Any]) -> dict[str, Any]:
    # The local queue would start 4: only the sweep's cap keeps it to 2.
    return {**hyperpod_config, "local_max_parallel_jobs": 4}


def write_script(partition: Path) -> None:
    (partition / "sweep").mkdir()
    (partition / "sweep" / "window.py").write_text(WINDOW)


def job_dirs(partition: Path) -> set[str]:
    jobs = partition / ".hyperpod" / "jobs"
    return {path.name for path in jobs.iterdir()} if jobs.is_dir() else set()


def snapshots_of(partition: Path) -> set[str]:
    snapshots = partition / ".hyperpod" / "snapshots"
    found = {path.name for path in snapshots.iterdir()} if snapshots.is_dir() else set()
    return found - {"objects"}


async def wait_sweep(api: Api, sweep_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        reply = await api.get(f"sweeps/{sweep_id}")
        assert reply.status == 200, reply.body
        if reply.body["summary"]["progress"] == 1 or time.monotonic() > deadline:
            return reply.body  # type: ignore[no-any-return]
        await asyncio.sleep(0.2)


async def wait_all_four_succeeded(api: Api, sweep_id: str, timeout: float = 60) -> dict[str, Any]:
    """The capped grid's sweep once it has ended: SUCCEEDED, all four members with it."""
    done = await wait_sweep(api, sweep_id, timeout=timeout)
    assert done["summary"]["state"] == "SUCCEEDED", done
    assert done["summary"]["counts"]["SUCCEEDED"] == 4
    return done


def capped_grid(seconds: float) -> dict[str, Any]:
    """A 2x2 grid of window.py runs of `seconds` each, at most 2 at once (every backend's test)."""
    return {
        "name": "grid",
        "template": "script",
        "params": {"script": "sweep/window.py"},
        "sweep": {"args": [f"a {seconds:g}", f"b {seconds:g}"], "time_limit_minutes": [5, 6]},
        "max_concurrent": 2,
    }


def assert_two_started_two_held(jobs: list[dict[str, Any]]) -> None:
    """The first two members went to the cluster; the other two wait for a slot, held by the
    server (nothing on the cluster yet)."""
    started, waiting = jobs[:2], jobs[2:]
    assert all(job["held"] is None and job["backend_id"] for job in started), started
    assert all(job["backend_id"] is None for job in waiting), waiting
    assert all(job["held"].startswith("waiting for a slot: 2 of sweep grid's 2") for job in waiting)


def window_of(log: str) -> tuple[float, float]:
    """When a member's window.py ran, from the line it printed."""
    line = next(text for text in log.splitlines() if text.startswith("window "))
    _, _, start, end = line.split()
    return float(start), float(end)


def most_at_once(windows: list[tuple[float, float]]) -> int:
    """The most members running at any member's start (its own included)."""
    return max(sum(1 for s, e in windows if s <= start < e) for start, _ in windows)


async def test_a_capped_grid_runs_two_at_a_time_and_finishes_all(api: Api, partition: Path) -> None:
    write_script(partition)
    reply = await api.post("sweeps", capped_grid(1.5))
    assert reply.status == 201, reply.body
    summary, jobs = reply.body["summary"], reply.body["jobs"]
    assert summary["size"] == 4 and summary["fields"] == ["args", "time_limit_minutes"]
    assert [job["name"] for job in jobs] == [
        "grid-a-1p5-timelimi5",
        "grid-a-1p5-timelimi6",
        "grid-b-1p5-timelimi5",
        "grid-b-1p5-timelimi6",
    ]
    assert [job["spec"]["sweep"]["point"] for job in jobs] == [
        {"args": "a 1.5", "time_limit_minutes": 5},
        {"args": "a 1.5", "time_limit_minutes": 6},
        {"args": "b 1.5", "time_limit_minutes": 5},
        {"args": "b 1.5", "time_limit_minutes": 6},
    ]
    # The first two started, the other two wait for a slot (held by the server, not the queue).
    assert [job["held"] is None for job in jobs] == [True, True, False, False]
    assert jobs[2]["state"] == "PENDING"
    assert_two_started_two_held(jobs)
    assert summary["counts"]["waiting"] == 2

    listed = (await api.get("sweeps")).body["sweeps"]
    assert [row["id"] for row in listed] == [summary["id"]]

    done = await wait_all_four_succeeded(api, summary["id"])
    assert done["summary"]["progress"] == 1
    windows = [window_of(Path(job["ranks"][0]["log"]).read_text()) for job in done["jobs"]]
    # At no start of a member were more than 2 running (its own included).
    assert most_at_once(windows) == 2, windows
    # Members are ordinary jobs: a rerun is a job of its own, outside the sweep.
    rerun = await api.post(f"jobs/{done['jobs'][0]['id']}/rerun", {})
    assert rerun.status == 201 and rerun.body["spec"]["sweep"] is None
    assert rerun.body["held"] is None


async def test_bulk_cancel_ends_every_member(api: Api, partition: Path) -> None:
    write_script(partition)
    reply = await api.post(
        "sweeps",
        {
            "name": "long",
            "template": "script",
            "params": {"script": "sweep/window.py"},
            "points": [{"args": "a 60"}, {"args": "b 60"}, {"args": "c 60"}],
            "max_concurrent": 1,
        },
    )
    assert reply.status == 201, reply.body
    sweep_id = reply.body["summary"]["id"]
    assert [job["name"] for job in reply.body["jobs"]] == ["long-a-60", "long-b-60", "long-c-60"]
    await api.wait_for(reply.body["jobs"][0]["id"], {"RUNNING"}, 30)
    cancelled = await api.post(f"sweeps/{sweep_id}/cancel", {})
    assert cancelled.status == 200, cancelled.body
    assert cancelled.body["summary"]["counts"]["CANCELLED"] == 3
    assert cancelled.body["summary"]["state"] == "CANCELLED"
    # the waiting ones never started: no job directory
    assert job_dirs(partition) == {reply.body["jobs"][0]["id"]}
    missing = await api.post("sweeps/nothing-abc123/cancel", {})
    assert missing.status == 404


@pytest.mark.parametrize(
    ("body", "status", "field", "words"),
    [
        (
            {"sweep": {"args": [f"a{i}" for i in range(100)], "nodes": list(range(1, 101))}},
            400,
            "sweep",
            "a sweep of 10,000 points is more than the limit of 256 points",
        ),
        ({"sweep": {"lr": [1, 2]}}, 400, "sweep.lr", "unknown parameter 'lr'"),
        (
            {"sweep": {"args": ["a", "b"], "nodes": [1, "two"]}},
            400,
            "sweep.nodes",
            "sweep point 2 (args=a, nodes=two): Nodes must be a whole number, not 'two'",
        ),
        ({"sweep": {"args": []}}, 400, "sweep.args", "args has no values to sweep"),
        ({"points": [{"args": "a"}, {"args": "a"}]}, 400, "points", "a point is listed twice"),
        ({"sweep": {"args": ["a"]}, "max_concurrent": 0}, 400, "max_concurrent", ""),
    ],
)
async def test_bad_sweeps_are_refused_and_create_nothing(
    api: Api, partition: Path, body: dict[str, Any], status: int, field: str, words: str
) -> None:
    write_script(partition)
    base = {"name": "bad", "template": "script", "params": {"script": "sweep/window.py"}}
    reply = await api.post("sweeps", {**base, **body})
    assert reply.status == status, reply.body
    assert reply.body["error"]["field"] == field
    assert words in reply.body["error"]["message"]
    assert (await api.get("jobs")).body["total"] == 0
    assert (await api.get("sweeps")).body["sweeps"] == []
    assert job_dirs(partition) == set() and snapshots_of(partition) == set()


async def test_members_waiting_for_an_unknown_job_are_refused_before_any_is_stored(
    api: Api, partition: Path
) -> None:
    """The chain's checks (`after`, in the overrides every member shares) run on every member
    before the first is stored."""
    write_script(partition)
    reply = await api.post(
        "sweeps",
        {
            "name": "late",
            "template": "script",
            "params": {"script": "sweep/window.py"},
            "overrides": {"after": ["nobody-000000"]},
            "sweep": {"args": ["a", "b"]},
        },
    )
    assert reply.status == 400, reply.body
    assert "nobody-000000" in reply.body["error"]["message"]
    assert (await api.get("jobs")).body["total"] == 0
    assert snapshots_of(partition) == set()


def test_expansion_names_and_limits() -> None:
    request = SweepRequest(
        name="qlora",
        template="qlora-finetune",
        sweep={"learning_rate": [1e-4, 2e-4, 5e-4], "lora_r": [8, 16]},
    )
    assert count_points(request) == 6
    points = expand(request, limit=6)
    assert points[0] == {"learning_rate": 1e-4, "lora_r": 8}
    assert points[1] == {"learning_rate": 1e-4, "lora_r": 16}
    assert member_names("qlora", points) == [
        "qlora-lr1e-4-r8",
        "qlora-lr1e-4-r16",
        "qlora-lr2e-4-r8",
        "qlora-lr2e-4-r16",
        "qlora-lr5e-4-r8",
        "qlora-lr5e-4-r16",
    ]
    with pytest.raises(Exception, match="a sweep of 6 points is more than the limit of 5"):
        expand(request, limit=5)
    assert [value_text(v) for v in (0.5, 3, True, "nf4", 1e-6, 2.0, 0.05)] == [
        "0p5",
        "3",
        "true",
        "nf4",
        "1e-6",
        "2",
        "0p05",
    ]
    # a point too long for a job name, or two that read the same: numbered
    long = [{"args": "x" * 60}, {"args": "y" * 60}]
    assert member_names("s", long) == ["s-0", "s-1"]
    assert member_names("s", [{"args": "a b"}, {"args": "a-b"}]) == ["s-0", "s-1"]
