"""On the real Slurm test cluster (#24 item 1): a job Slurm holds PENDING runs the files of its
submit, not an edit made while it waits."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ..helpers import Api, log_text
from .test_rest_slurm import scripts, sleeper, slurm_state, until_finished

pytestmark = pytest.mark.slurm
__all__ = ["scripts"]  # the fixture, used by name


async def test_an_edit_while_slurm_holds_the_job_changes_nothing(api: Api, scripts: Path) -> None:
    (scripts / "train.py").write_text("print('ran v1', flush=True)\n")
    # Every GPU of the 4 nodes taken: the next job waits for Resources.
    blocker = await api.submit(sleeper("blocker", 300, nodes=4, gpus_per_node=4))
    await api.wait_for(blocker["id"], {"RUNNING"}, timeout=60)
    job = await api.submit(
        {
            "name": "train",
            "command": ["train.py"],
            "workdir": "project",
            "launcher": "plain",
            "gpus_per_node": 1,
        }
    )
    deadline = time.monotonic() + 20
    while slurm_state(job["backend_id"]) != "PENDING" and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
    assert slurm_state(job["backend_id"]) == "PENDING"
    assert job["snapshot"]["files"] == 4 and job["snapshot"]["commit"] is None

    (scripts / "train.py").write_text("print('ran v2, edited while pending', flush=True)\n")
    assert (await api.delete(f"jobs/{blocker['id']}")).status == 200
    done = await until_finished(api, job, timeout=90)
    assert done["state"] == "SUCCEEDED", done
    frames, _ = await api.follow(job["id"], rank="all")
    lines = log_text(frames, 0).splitlines()
    assert "ran v1" in lines and not any("v2" in line for line in lines), lines
