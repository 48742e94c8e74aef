"""A 2x2 sweep capped at 2 on the real Slurm test cluster (#24 items 3 and 5): the first two
members go to Slurm at once, the other two are held by the server (no Slurm job yet) until a slot
frees; Slurm, which has room for all four, never runs more than two; all four succeed and the
group row counts them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import Api
from ..test_sweeps import (
    assert_two_started_two_held,
    capped_grid,
    most_at_once,
    wait_all_four_succeeded,
    window_of,
    write_script,
)
from .test_rest_slurm import slurm_state

pytestmark = pytest.mark.slurm


async def test_a_capped_2x2_sweep_runs_two_at_a_time_on_slurm(api: Api, partition: Path) -> None:
    write_script(partition)
    reply = await api.post("sweeps", capped_grid(3))
    assert reply.status == 201, reply.body
    summary, jobs = reply.body["summary"], reply.body["jobs"]
    assert summary["size"] == 4
    assert_two_started_two_held(jobs)
    assert all(slurm_state(job["backend_id"]) in ("PENDING", "RUNNING") for job in jobs[:2])

    done = await wait_all_four_succeeded(api, summary["id"], timeout=150)
    assert all(job["backend_id"] for job in done["jobs"])  # each released to Slurm in turn
    ran = [window_of(Path(job["ranks"][0]["log"]).read_text()) for job in done["jobs"]]
    assert most_at_once(ran) <= 2, ran
    # Slurm's own record agrees: every member's job completed.
    assert {slurm_state(job["backend_id"]) for job in done["jobs"]} == {"COMPLETED"}
