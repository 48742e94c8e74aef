"""A 2x2 sweep capped at 2 on the real Slurm test cluster (#24 items 3 and 5): the first two
members go to Slurm at once, the other two are held by the server (no Slurm job yet) until a slot
frees; Slurm, which has room for all four, never runs more than two; all four succeed and the
group row counts them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..helpers import Api
from ..test_sweeps import wait_sweep, write_script
from .test_rest_slurm import slurm_state

pytestmark = pytest.mark.slurm


def windows(jobs: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """When each member's script ran, from the line it printed to its rank's log."""
    found = []
    for job in jobs:
        line = next(
            text
            for text in Path(job["ranks"][0]["log"]).read_text().splitlines()
            if text.startswith("window ")
        )
        _, _, start, end = line.split()
        found.append((float(start), float(end)))
    return found


async def test_a_capped_2x2_sweep_runs_two_at_a_time_on_slurm(api: Api, partition: Path) -> None:
    write_script(partition)
    reply = await api.post(
        "sweeps",
        {
            "name": "grid",
            "template": "script",
            "params": {"script": "sweep/window.py"},
            "sweep": {"args": ["a 3", "b 3"], "time_limit_minutes": [5, 6]},
            "max_concurrent": 2,
        },
    )
    assert reply.status == 201, reply.body
    summary, jobs = reply.body["summary"], reply.body["jobs"]
    assert summary["size"] == 4
    started, waiting = jobs[:2], jobs[2:]
    assert all(job["held"] is None and job["backend_id"] for job in started), started
    assert all(slurm_state(job["backend_id"]) in ("PENDING", "RUNNING") for job in started)
    assert all(job["backend_id"] is None for job in waiting), waiting  # not on Slurm yet
    assert all(job["held"].startswith("waiting for a slot: 2 of sweep grid's 2") for job in waiting)

    done = await wait_sweep(api, summary["id"], timeout=150)
    assert done["summary"]["state"] == "SUCCEEDED", done
    assert done["summary"]["counts"]["SUCCEEDED"] == 4
    assert all(job["backend_id"] for job in done["jobs"])  # each released to Slurm in turn
    ran = windows(done["jobs"])
    most = max(sum(1 for s, e in ran if s <= start < e) for start, _ in ran)
    assert most <= 2, ran
    # Slurm's own record agrees: every member's job completed.
    assert {slurm_state(job["backend_id"]) for job in done["jobs"]} == {"COMPLETED"}
