"""The REST API and the log WebSocket of a real Jupyter server driving the Slurm test cluster."""

from __future__ import annotations

import asyncio
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ..helpers import Api, log_text
from .conftest import scontrol

pytestmark = pytest.mark.slurm

DIST = textwrap.dedent(
    """
    import os
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    total = torch.tensor([dist.get_rank()])
    dist.all_reduce(total)
    print(f"rank={os.environ['RANK']} local_rank={os.environ['LOCAL_RANK']}"
          f" world_size={os.environ['WORLD_SIZE']} group_rank={dist.get_rank()} sum={int(total)}"
          f" node={os.environ['SLURMD_NODENAME']} gpus={os.environ.get('CUDA_VISIBLE_DEVICES')}"
          f" master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
          f" slurm_job={os.environ['SLURM_JOB_ID']}",
          flush=True)
    dist.destroy_process_group()
    """
)

SLEEPER = textwrap.dedent(
    """
    import os, sys, time
    print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} starts", flush=True)
    time.sleep(float(sys.argv[1]))
    print(f"rank {os.environ['RANK']} done", flush=True)
    """
)

TICKER = textwrap.dedent(
    """
    import os, time
    for step in range(12):
        print(f"rank {os.environ['RANK']} tick {step}", flush=True)
        time.sleep(0.25)
    """
)


@pytest.fixture
def scripts(partition: Path) -> Path:
    project = partition / "project"
    project.mkdir(exist_ok=True)
    (project / "dist.py").write_text(DIST)
    (project / "sleeper.py").write_text(SLEEPER)
    (project / "ticker.py").write_text(TICKER)
    return project


def sleeper(name: str, seconds: float, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "command": ["sleeper.py", str(seconds)],
        "workdir": "project",
        "launcher": "plain",
        **fields,
    }


def slurm_state(slurm_id: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%T"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


async def until_finished(api: Api, job: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The job once it has ended; a 503 while slurmctld settles after a restart is waited out."""
    deadline = time.monotonic() + timeout
    while True:
        reply = await api.get(f"jobs/{job['id']}")
        if reply.status == 200 and reply.body["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return reply.body  # type: ignore[no-any-return]
        assert reply.status in (200, 503), reply.body
        if time.monotonic() > deadline:
            raise AssertionError(
                f"job still {reply.status} {reply.body} after {timeout}s; "
                f"Slurm says {slurm_state(job['backend_id'])}"
            )
        await asyncio.sleep(0.3)


async def test_cluster_and_nodes(api: Api) -> None:
    cluster = (await api.get("cluster")).body
    assert cluster["orchestrator"] == "slurm" and cluster["name"] == "hyperpod-test"
    assert cluster["capabilities"]["render_format"] == "sbatch"
    assert cluster["details"]["slurm_version"] and cluster["details"]["accounting"] is False

    scontrol("update", "nodename=node2", "state=drain", "reason=NVLink errors (dcgmi diag)")
    try:
        reply = await api.get("nodes")
    finally:
        scontrol("update", "nodename=node2", "state=resume")
    assert reply.status == 200, reply.body
    listed = (
        {node["name"]: node for node in reply.body}
        if isinstance(reply.body, list)
        else {node["name"]: node for node in reply.body["nodes"]}
    )
    assert sorted(listed) == ["node1", "node2", "node3", "node4"]
    assert listed["node2"]["state"] == "drained"
    assert listed["node2"]["health"] == "unhealthy"
    assert listed["node2"]["health_detail"] == "NVLink errors (dcgmi diag)"
    for name in ("node1", "node3", "node4"):
        assert listed[name]["gpus"] == {"total": 4, "allocated": 0, "type": "fake"}
        assert listed[name]["instance_type"] == "ml.g5.12xlarge"
        assert listed[name]["partitions"] == ["debug"] and listed[name]["cpus"] == 4


async def test_preview_of_a_template_is_the_sbatch_script(api: Api, scripts: Path) -> None:
    body = {
        "name": "preview",
        "template": "script",
        "params": {
            "script": "project/dist.py",
            "args": "--lr 'a b'",
            "nodes": 2,
            "procs_per_node": 2,
            "gpus_per_node": 2,
            "time_limit_minutes": 30,
        },
    }
    reply = await api.post("jobs/render", body)
    assert reply.status == 200, reply.body
    text = reply.body["text"]
    assert reply.body["format"] == "sbatch" and reply.body["language"] == "shell"
    for line in (
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=2",
        "#SBATCH --time=30",
        "#SBATCH --job-name=preview",
    ):
        assert line in text
    assert "torchrun --nnodes=2 --nproc-per-node=2" in text
    assert "python3 dist.py --lr 'a b'" in text


async def test_two_nodes_two_gpus_each_all_ranks_in_the_followed_log(
    api: Api, scripts: Path
) -> None:
    job = await api.submit(
        {
            "name": "ddp",
            "command": ["dist.py"],
            "workdir": "project",
            "nodes": 2,
            "procs_per_node": 2,
            "gpus_per_node": 2,
            "launcher": "torchrun",
        }
    )
    assert job["backend_id"].isdigit()

    frames, _ = await api.follow(job["id"], timeout=120, rank="all")

    assert frames[-1] == {"type": "end", "state": "SUCCEEDED", "exit_code": 0}, frames[-3:]
    nodes: dict[int, str] = {}
    masters: set[str] = set()
    for rank in range(4):
        line = next(
            line for line in log_text(frames, rank).splitlines() if line.startswith("rank=")
        )
        fields = dict(item.split("=", 1) for item in line.split())
        assert fields["rank"] == fields["group_rank"] == str(rank)
        assert (fields["world_size"], fields["sum"], fields["local_rank"]) == (
            "4",
            "6",
            str(rank % 2),
        )
        assert fields["gpus"] == "0,1"
        nodes[rank] = fields["node"]
        masters.add(fields["master"])
    assert nodes[0] == nodes[1] != nodes[2] == nodes[3]
    # The allocation's first node is the master; the port is derived from the Slurm job id.
    assert masters == {f"{min(nodes.values())}:{20000 + int(job['backend_id']) % 20000}"}
    assert nodes[0] == min(nodes.values())  # node rank 0 = SLURM_NODEID 0 = the first node
    done = (await api.get(f"jobs/{job['id']}")).body
    assert [(r["rank"], r["node"]) for r in done["ranks"]] == [(r, nodes[r]) for r in range(4)]
    assert slurm_state(job["backend_id"]) == "COMPLETED"


async def test_cancel_a_running_job(api: Api, scripts: Path) -> None:
    job = await api.submit(sleeper("cancel", 300, nodes=2))
    await api.wait_for(job["id"], {"RUNNING"})

    reply = await api.delete(f"jobs/{job['id']}")

    assert reply.status == 200 and reply.body["state"] == "CANCELLED", reply.body
    deadline = time.monotonic() + 20
    while slurm_state(job["backend_id"]) != "CANCELLED" and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
    assert slurm_state(job["backend_id"]) == "CANCELLED"
    assert (await api.get(f"jobs/{job['id']}")).body["state"] == "CANCELLED"


async def test_controller_outage_answers_503_and_recovers(
    api: Api, scripts: Path, controller_outage: Any
) -> None:
    job = await api.submit(sleeper("outlives", 6, nodes=2, procs_per_node=2))
    await api.wait_for(job["id"], {"RUNNING"})

    controller_outage.stop()
    nodes = await api.get("nodes")
    # Status reads answer from the store: the last known state, marked stale with the reason
    # once the background refresh has failed (core/tracker.py), never a 503.
    deadline = time.monotonic() + 10
    while not (status := await api.get(f"jobs/{job['id']}")).body.get("stale_reason"):
        assert status.status == 200 and status.body["state"] == "RUNNING", status.body
        assert time.monotonic() < deadline, status.body
        await asyncio.sleep(0.2)
    assert status.status == 200 and status.body["state"] == "RUNNING"
    assert "slurmctld" in status.body["stale_reason"]
    listed = await api.get("jobs")
    assert listed.status == 200 and "slurmctld" in listed.body["stale_reason"]
    refused = await api.post("jobs", sleeper("during", 1))
    await asyncio.sleep(5)  # the job ends while slurmctld is away
    controller_outage.start()

    for reply in (nodes, refused):
        assert reply.status == 503, reply.body
        assert reply.body["error"]["code"] == "backend_unavailable"
        assert "slurmctld" in reply.body["error"]["message"]
    done = await until_finished(api, job, timeout=120)
    assert (done["state"], done["exit_code"]) == ("SUCCEEDED", 0), done
    snapshot = (await api.get(f"jobs/{job['id']}/logs", rank=3)).body
    assert snapshot["text"].splitlines() == ["rank 3 of 4 starts", "rank 3 done"]
    assert (await api.get("nodes")).status == 200
    listed = (await api.get("jobs")).body["jobs"]
    assert [j["id"] for j in listed] == [job["id"]]


async def test_follow_resumes_from_a_snapshot_offset(api: Api, scripts: Path) -> None:
    """A snapshot of Slurm's real output file, then the WebSocket from its offset: nothing twice."""
    job = await api.submit(
        {
            "name": "ticks",
            "command": ["ticker.py"],
            "workdir": "project",
            "procs_per_node": 2,
            "launcher": "plain",
        }
    )
    snapshot: dict[str, Any] = {"text": "", "offset": 0}
    deadline = time.monotonic() + 60
    while "tick 2" not in snapshot["text"] and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        snapshot = (await api.get(f"jobs/{job['id']}/logs", rank=0)).body
    assert "tick 2" in snapshot["text"] and "tick 11" not in snapshot["text"]
    assert snapshot["text"].startswith(f"job {job['backend_id']} on 1 node(s)")

    frames, _ = await api.follow(job["id"], timeout=60, rank=0, offset=snapshot["offset"])

    whole = snapshot["text"] + log_text(frames, 0)
    ticks = [line for line in whole.splitlines() if line.startswith("rank 0 tick")]
    assert ticks == [f"rank 0 tick {step}" for step in range(12)]
    assert (
        whole.rstrip()
        .splitlines()[-1]
        .startswith(f"job {job['backend_id']} finished with exit code 0")
    )
    stdout = (await api.get(f"jobs/{job['id']}")).body["ranks"][0]["log"]
    assert stdout.endswith(f"/slurm-{job['backend_id']}.out")
    assert Path(stdout).read_text() == whole


async def test_what_slurm_refuses_names_the_field(api: Api, scripts: Path) -> None:
    reply = await api.post("jobs", sleeper("wrong-queue", 1, queue="nope"))
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == "queue"
    assert "Slurm has no partition 'nope' (partitions: debug)" in reply.body["error"]["message"]

    reply = await api.post("jobs", sleeper("too-many-gpus", 1, gpus_per_node=8))
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == "gpus_per_node"
    assert (await api.get("jobs")).body["total"] == 0
