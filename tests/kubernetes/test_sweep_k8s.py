"""A 2x2 sweep capped at 2 on the Kubernetes doubles (#24 items 3 and 5): the first two members
are created on the cluster at once, the other two are held by the server (no job object) until a
slot frees; never more than two run; all four succeed."""

from __future__ import annotations

from pathlib import Path

from ..helpers import Api, log_text
from ..test_sweeps import wait_sweep, write_script
from .test_rest import jp_server_config, k8s_traits

__all__ = ["jp_server_config", "k8s_traits"]  # the fixtures, used by name


async def test_a_capped_2x2_sweep_runs_two_at_a_time_on_kubernetes(
    api: Api, partition: Path
) -> None:
    write_script(partition)
    reply = await api.post(
        "sweeps",
        {
            "name": "grid",
            "template": "script",
            "params": {"script": "sweep/window.py"},
            "sweep": {"args": ["a 2", "b 2"], "time_limit_minutes": [5, 6]},
            "max_concurrent": 2,
        },
    )
    assert reply.status == 201, reply.body
    summary, jobs = reply.body["summary"], reply.body["jobs"]
    started, waiting = jobs[:2], jobs[2:]
    assert all(job["held"] is None and job["backend_id"] for job in started), started
    assert all(job["backend_id"] is None for job in waiting), waiting  # no job object yet
    assert all(job["held"].startswith("waiting for a slot: 2 of sweep grid's 2") for job in waiting)

    done = await wait_sweep(api, summary["id"], timeout=150)
    assert done["summary"]["state"] == "SUCCEEDED", done
    assert done["summary"]["counts"]["SUCCEEDED"] == 4
    assert all(job["backend_id"] for job in done["jobs"])  # each created in turn
    ran = []
    for job in done["jobs"]:
        frames, _ = await api.follow(job["id"], rank="all", timeout=30)
        line = next(text for text in log_text(frames, 0).splitlines() if text.startswith("window "))
        _, _, start, end = line.split()
        ran.append((float(start), float(end)))
    most = max(sum(1 for s, e in ran if s <= start < e) for start, _ in ran)
    assert most <= 2, ran
