"""A 2x2 sweep capped at 2 on the Kubernetes doubles (#24 items 3 and 5): the first two members
are created on the cluster at once, the other two are held by the server (no job object) until a
slot frees; never more than two run; all four succeed."""

from __future__ import annotations

from pathlib import Path

from ..helpers import Api, log_text
from ..test_sweeps import (
    assert_two_started_two_held,
    capped_grid,
    most_at_once,
    wait_all_four_succeeded,
    window_of,
    write_script,
)
from .test_rest import jp_server_config, k8s_traits

__all__ = ["jp_server_config", "k8s_traits"]  # the fixtures, used by name


async def test_a_capped_2x2_sweep_runs_two_at_a_time_on_kubernetes(
    api: Api, partition: Path
) -> None:
    write_script(partition)
    reply = await api.post("sweeps", capped_grid(2))
    assert reply.status == 201, reply.body
    summary, jobs = reply.body["summary"], reply.body["jobs"]
    assert_two_started_two_held(jobs)

    done = await wait_all_four_succeeded(api, summary["id"], timeout=150)
    assert all(job["backend_id"] for job in done["jobs"])  # each created in turn
    ran = []
    for job in done["jobs"]:
        frames, _ = await api.follow(job["id"], rank="all", timeout=30)
        ran.append(window_of(log_text(frames, 0)))
    assert most_at_once(ran) <= 2, ran
