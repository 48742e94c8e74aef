"""The watchdog on the local backend, with real gloo ranks (torch on CPU) through the real server:
a rank asleep before its all_reduce hangs the job (detected within the bound), a rank three times
slower is named a straggler, a job slow everywhere raises nothing; bad watchdog input gets 400."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ..helpers import Api

pytest.importorskip("torch")
PROGRAM = Path(__file__).with_name("gloo_ranks.py")


@pytest.fixture
def project(partition: Path) -> Path:
    path = partition / "project"
    path.mkdir()
    shutil.copy(PROGRAM, path / "gloo_ranks.py")
    return path


def spec(name: str, mode: str, steps: int, step_seconds: float, **watchdog: Any) -> dict:
    return {
        "name": name,
        "command": ["gloo_ranks.py", mode, str(steps), str(step_seconds)],
        "workdir": "project",
        "procs_per_node": 2,
        "launcher": "plain",
        "env": {"OMP_NUM_THREADS": "1"},
        "watchdog": {"hang_factor": 3, "hang_floor_seconds": 2, **watchdog},
    }


async def watch_until(api: Api, job_id: str, done: Any, timeout: float = 90) -> dict[str, Any]:
    """GET the job until `done(job)`; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        job = (await api.get(f"jobs/{job_id}")).body
        if done(job):
            return job
        assert time.monotonic() < deadline, f"not seen in {timeout}s: {job}"
        await asyncio.sleep(0.2)


async def jobs_cli(server: Any) -> str:
    return await cli_run(server, "jobs")


async def cli_run(server: Any, *args: str) -> str:
    """`jupyter hyperpod ARGS` against the test server, as a subprocess."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "jupyter_hyperpod.cli",
        *args,
        "--url",
        server.connection_url,
        "--token",
        server.identity_provider.token,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1"},
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err
    return out.decode()


async def test_a_rank_asleep_before_all_reduce_hangs_the_job(
    api: Api, project: Path, jp_serverapp: Any
) -> None:
    job = await api.submit(spec("hang", "hang", 1000, 0.2))
    started = await watch_until(
        api, job["id"], lambda j: j["watchdog"] and all(r["step"] for r in j["watchdog"]["ranks"])
    )
    assert started["state"] == "RUNNING" and started["watchdog"]["stalled_since"] is None
    stalled = await watch_until(api, job["id"], lambda j: j["watchdog"]["stalled_since"])
    seen = time.time()
    watchdog = stalled["watchdog"]
    assert stalled["state"] == "RUNNING"  # a state detail, not a new state
    last_steps = [r["last_step_at"] for r in watchdog["ranks"]]
    bound = watchdog["bound_seconds"]
    assert bound == pytest.approx(2.0, abs=0.5)  # max(3 x 0.2 s, 2 s)
    assert watchdog["stalled_since"] == max(last_steps)
    # Detected within the bound (plus a refresh or two of 0.2 s and the polling).
    assert seen - watchdog["stalled_since"] < bound + 2.0
    assert {r["step"] for r in watchdog["ranks"]} == {4}
    assert [r["rank"] for r in watchdog["stopped_first"]] and all(
        r["node"] for r in watchdog["stopped_first"]
    )
    assert "no new step on any rank" in watchdog["stalled_detail"]
    listed = (await api.get("jobs")).body["jobs"][0]
    assert listed["watchdog"]["stalled_since"] == watchdog["stalled_since"]
    shown = await jobs_cli(jp_serverapp)  # `%hyperpod jobs` prints the same table
    assert "stalled since" in shown and "stopped first: rank" in shown and " at step 4" in shown

    # Both stacks dumped: rank 1 asleep in its own frame, rank 0 waiting inside all_reduce.
    dump = (await api.post(f"jobs/{job['id']}/stacks", {})).body
    by_rank = {r["rank"]: r for r in dump["ranks"]}
    assert set(by_rank) == {0, 1} and not [r for r in dump["ranks"] if r["error"]], dump
    sleeper = [
        f for f in by_rank[1]["threads"][0]["frames"] if f["name"] == "sleep_before_all_reduce"
    ]
    assert sleeper and sleeper[0]["differs"]
    waiter = by_rank[0]["threads"][0]["frames"]
    assert any(f["name"] == "all_reduce" for f in waiter)
    assert not [f for f in waiter if f["name"] == "sleep_before_all_reduce"]
    assert (await api.get(f"jobs/{job['id']}/stacks")).body == dump  # stored with the job
    shown = await cli_run(jp_serverapp, "stacks", job["id"], "--last")
    assert "* sleep_before_all_reduce (gloo_ranks.py:" in shown and "rank 1 (" in shown
    await api.delete(f"jobs/{job['id']}")


async def test_a_rank_three_times_slower_is_a_straggler(api: Api, project: Path) -> None:
    job = await api.submit(
        spec("straggler", "straggler", 400, 0.05, window_seconds=1, straggler_windows=2)
    )
    found = await watch_until(
        api, job["id"], lambda j: j["watchdog"] and j["watchdog"]["stragglers"]
    )
    (straggler,) = found["watchdog"]["stragglers"]
    assert straggler["rank"] == 1 and straggler["node"]
    assert straggler["rate"] < 0.5 * straggler["others_rate"]
    assert found["watchdog"]["stalled_since"] is None
    await api.delete(f"jobs/{job['id']}")


async def test_a_job_slow_everywhere_raises_no_alarm(api: Api, project: Path) -> None:
    job = await api.submit(spec("slow", "slow", 14, 0.5, window_seconds=1, straggler_windows=2))
    seen: list[dict[str, Any]] = []

    def ended(j: dict[str, Any]) -> bool:
        if j["state"] == "RUNNING" and j["watchdog"]:
            seen.append(j["watchdog"])
        return j["state"] in ("SUCCEEDED", "FAILED")

    done = await watch_until(api, job["id"], ended)
    assert done["state"] == "SUCCEEDED", done
    stepping = [w for w in seen if all(r["step"] for r in w["ranks"])]
    assert len(stepping) > 10
    assert not [w for w in seen if w["stalled_since"] or w["stragglers"]]


@pytest.mark.parametrize(
    ("watchdog", "field"),
    [
        ({"step_pattern": "step (\\d+"}, "watchdog.step_pattern"),
        ({"hang_factor": 0}, "watchdog.hang_factor"),
        ({"hang_floor_seconds": 365 * 86400}, "watchdog.hang_floor_seconds"),
    ],
)
async def test_bad_watchdog_input_is_a_400_naming_the_field(
    api: Api, project: Path, watchdog: dict[str, Any], field: str
) -> None:
    body = spec("bad", "slow", 1, 0.1)
    body["watchdog"] = watchdog
    reply = await api.post("jobs", body)
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == field
    assert field in reply.body["error"]["message"]


async def test_auto_cancel_after_minutes_stalled_with_the_evidence(api: Api, project: Path) -> None:
    job = await api.submit(spec("autocancel", "hang", 1000, 0.2, auto_cancel_minutes=0.05))
    done = await watch_until(api, job["id"], lambda j: j["state"] == "CANCELLED")
    assert done["state_reason"].startswith("cancelled by the watchdog after 0.05 min stalled: ")
    (event,) = [e for e in done["events"] if e.startswith("watchdog: ")]
    assert "no new step on any rank" in event and "stopped first: rank" in event


async def test_a_job_that_prints_no_steps_is_never_stalled(api: Api, project: Path) -> None:
    body = spec("quiet", "slow", 1, 0.1)
    body["command"] = ["quiet.py"]
    (project / "quiet.py").write_text("import time\nprint('working', flush=True)\ntime.sleep(6)\n")
    job = await api.submit(body)
    seen: list[dict[str, Any]] = []

    def ended(j: dict[str, Any]) -> bool:
        if j["state"] == "RUNNING" and j["watchdog"]:
            seen.append(j["watchdog"])
        return j["state"] in ("SUCCEEDED", "FAILED")

    assert (await watch_until(api, job["id"], ended))["state"] == "SUCCEEDED"
    assert seen and not [w for w in seen if w["stalled_since"]]  # watched: 6 s > the 2 s floor
