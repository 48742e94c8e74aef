"""On the Kubernetes doubles (#24 item 1): a job whose pods wait unschedulable runs the files of
its submit, not an edit made while it waits."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ..helpers import Api, log_text
from .test_rest import jp_server_config, k8s_traits, project, spec

__all__ = ["jp_server_config", "k8s_traits"]  # the fixtures, used by name


async def test_an_edit_while_the_pods_wait_changes_nothing(api: Api, partition: Path) -> None:
    project(partition)
    (partition / "project" / "version.py").write_text("print('ran v1', flush=True)\n")
    # Every GPU of the 4 nodes taken: the next job's pod waits for the scheduler.
    blocker = await api.submit(
        spec("blocker", nodes=4, gpus_per_node=8, env={"FAKE_STEPS": "100000"})
    )
    await api.wait_for(blocker["id"], {"RUNNING"}, timeout=60)
    job = await api.submit(
        {"name": "version", "command": ["version.py"], "workdir": "project", "gpus_per_node": 1}
    )
    assert job["snapshot"]["files"] == 2
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # still waiting: the scheduler has no GPU for it
        assert (await api.get(f"jobs/{job['id']}")).body["state"] == "PENDING"
        await asyncio.sleep(0.5)

    (partition / "project" / "version.py").write_text("print('ran v2, edited', flush=True)\n")
    assert (await api.delete(f"jobs/{blocker['id']}")).status in (200, 202)
    done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"}, timeout=90)
    assert done["state"] == "SUCCEEDED", done
    frames, _ = await api.follow(job["id"], rank="all", timeout=30)
    lines = log_text(frames, 0).splitlines()
    assert "ran v1" in lines and not any("v2" in line for line in lines), lines
