"""The watchdog on the real Slurm test cluster: two gloo ranks on two nodes, one asleep before its
all_reduce (hang detected within the bound, both stacks dumped through `srun --overlap`, the
sleeping frame shown), one three times slower (straggler named with its node), and a resubmit
without a node (sbatch --exclude)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ..helpers import Api
from ..watchdog.test_local import watch_until

pytestmark = pytest.mark.slurm
pytest.importorskip("torch")
PROGRAM = Path(__file__).parents[1] / "watchdog" / "gloo_ranks.py"


@pytest.fixture
def project(partition: Path) -> Path:
    path = partition / "project"
    path.mkdir(exist_ok=True)
    shutil.copy(PROGRAM, path / "gloo_ranks.py")
    return path


def spec(name: str, mode: str, steps: int, step_seconds: float, **fields: Any) -> dict:
    watchdog = fields.pop("watchdog", {})
    return {
        "name": name,
        "command": ["gloo_ranks.py", mode, str(steps), str(step_seconds)],
        "workdir": "project",
        "nodes": 2,
        "procs_per_node": 1,
        "launcher": "plain",
        "env": {"OMP_NUM_THREADS": "1"},
        "watchdog": {"hang_factor": 3, "hang_floor_seconds": 3, **watchdog},
        **fields,
    }


async def test_a_hang_on_slurm_is_seen_and_both_stacks_dumped(api: Api, project: Path) -> None:
    job = await api.submit(spec("hang", "hang", 1000, 0.2, exclude_nodes=["node1"]))
    slurm_id = job["backend_id"]
    shown = subprocess.run(
        ["scontrol", "show", "job", slurm_id], capture_output=True, text=True, check=True
    ).stdout
    assert "ExcNodeList=node1" in shown
    stalled = await watch_until(
        api, job["id"], lambda j: j["watchdog"] and j["watchdog"]["stalled_since"], timeout=120
    )
    seen = time.time()
    watchdog = stalled["watchdog"]
    assert stalled["state"] == "RUNNING"
    assert seen - watchdog["stalled_since"] < watchdog["bound_seconds"] + 3.0
    assert {r["step"] for r in watchdog["ranks"]} == {4}
    nodes = {r["node"] for r in watchdog["stopped_first"]}
    assert nodes and "node1" not in nodes and all(n and n.startswith("node") for n in nodes)

    dump = (await api.post(f"jobs/{job['id']}/stacks", {})).body
    by_rank = {r["rank"]: r for r in dump["ranks"]}
    assert set(by_rank) == {0, 1} and not [r for r in dump["ranks"] if r["error"]], dump
    assert {r["node"] for r in dump["ranks"]} <= {"node2", "node3", "node4"}
    sleeper = [
        f for f in by_rank[1]["threads"][0]["frames"] if f["name"] == "sleep_before_all_reduce"
    ]
    assert sleeper and sleeper[0]["differs"]
    assert any(f["name"] == "all_reduce" for f in by_rank[0]["threads"][0]["frames"])
    assert (await api.delete(f"jobs/{job['id']}")).body["state"] == "CANCELLED"


async def test_a_slow_rank_on_slurm_is_a_straggler(api: Api, project: Path) -> None:
    job = await api.submit(
        spec(
            "straggler",
            "straggler",
            400,
            0.05,
            watchdog={"window_seconds": 1, "straggler_windows": 2},
        )
    )
    found = await watch_until(
        api, job["id"], lambda j: j["watchdog"] and j["watchdog"]["stragglers"], timeout=120
    )
    (straggler,) = found["watchdog"]["stragglers"]
    assert straggler["rank"] == 1 and (straggler["node"] or "").startswith("node")
    assert found["watchdog"]["stalled_since"] is None
    await api.delete(f"jobs/{job['id']}")
    await asyncio.sleep(0)


async def test_a_job_slow_everywhere_on_slurm_raises_no_alarm(api: Api, project: Path) -> None:
    job = await api.submit(
        spec("slow", "slow", 12, 0.5, watchdog={"window_seconds": 1, "straggler_windows": 2})
    )
    seen: list[dict[str, Any]] = []

    def ended(j: dict[str, Any]) -> bool:
        if j["state"] == "RUNNING" and j["watchdog"]:
            seen.append(j["watchdog"])
        return j["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")

    done = await watch_until(api, job["id"], ended, timeout=120)
    assert done["state"] == "SUCCEEDED", done
    assert [w for w in seen if all(r["step"] for r in w["ranks"])]
    assert not [w for w in seen if w["stalled_since"] or w["stragglers"]]
