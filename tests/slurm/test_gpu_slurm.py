"""The Slurm journey with GPU figures: a job submitted through the REST API to the real Slurm
test cluster, each node's GPUs served by the DCGM-format exporter and scraped by the real
Prometheus; GET gpu/nodes shows every Slurm node and GET jobs/{id}/gpu the job's own GPUs.

DCGM on Slurm has no job label: a job's GPUs are its nodes (the exporter's `Hostname` label is the
host name, which HyperPod Slurm uses as the Slurm node name) and on each the GPU indices Slurm
gave it (`scontrol -d show job`: GRES=gpu:2(IDX:2-3)), over its run. Here the four slurmd of the
test cluster share one machine, so the exporter serves each node's series under its Slurm name,
as each node's own dcgm-exporter would.
"""

from __future__ import annotations

import asyncio
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..gpu.conftest import Exporter, exporter, prometheus  # noqa: F401 - fixtures
from ..helpers import Api
from ..test_contract import check
from .conftest import SUBMITTED

pytestmark = pytest.mark.slurm

NODES = [f"node{n}" for n in range(1, 5)]
GPUS = 4
BLOCKER = ["sbatch", "--parsable", "-N", "4", "--gres=gpu:2", "-o", "/dev/null", "--wrap"]
"""Another user's job on every node, holding GPUs 0-1 of each."""

WAIT_FOR_GO = textwrap.dedent(
    """
    import os, pathlib, time
    go = pathlib.Path("go")
    deadline = time.monotonic() + 180
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    print(f"rank {os.environ['RANK']} on {os.environ['SLURMD_NODENAME']}"
          f" gpus={os.environ.get('CUDA_VISIBLE_DEVICES')}", flush=True)
    """
)


def utilization(node: str, gpu: int) -> float:
    """Each GPU's own figure, so that any mix-up of nodes or GPUs shows."""
    return float(10 * NODES.index(node) + gpu + 1)


def memory_used(node: str, gpu: int) -> float:
    return float(1000 * (NODES.index(node) + 1) + 100 * gpu)


@pytest.fixture
def hyperpod_config(hyperpod_config: dict[str, Any], prometheus: str) -> dict[str, Any]:  # noqa: F811
    return {**hyperpod_config, "gpu_metrics_url": prometheus}


@pytest.fixture
def dcgm_on_every_node(exporter: Exporter) -> Iterator[Exporter]:  # noqa: F811
    for node in NODES:
        for gpu in range(GPUS):
            exporter.set(
                node,
                gpu,
                utilization=utilization(node, gpu),
                memory_used_mb=memory_used(node, gpu),
                memory_free_mb=24576 - memory_used(node, gpu),  # an A10G's 24 GiB (ml.g5)
            )
    yield exporter
    for node in NODES:
        exporter.remove(node)


def slurm_nodes(slurm_id: str) -> list[str]:
    """The job's nodes as Slurm lists them (`squeue -o %N`, expanded by `scontrol show hostnames`)."""
    listed = subprocess.run(
        ["squeue", "-h", "-j", slurm_id, "-o", "%N"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    names = subprocess.run(
        ["scontrol", "show", "hostnames", listed],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.split()
    return names


async def test_a_slurm_job_shows_the_gpus_slurm_gave_it(
    api: Api, partition: Path, dcgm_on_every_node: Exporter
) -> None:
    project = partition / "project"
    project.mkdir(exist_ok=True)
    (project / "wait_for_go.py").write_text(WAIT_FOR_GO)

    # The Cluster view: every Slurm node's GPUs, under the names GET nodes gives them.
    expected_nodes = set(NODES)
    for _ in range(300):
        reply = await api.get("gpu/nodes")
        shown = {n["node"]: n for n in reply.body["nodes"] if n["node"] in expected_nodes}
        if len(shown) == len(NODES) and all(len(n["gpus"]) == GPUS for n in shown.values()):
            break
        await asyncio.sleep(0.2)
    check("/gpu/nodes", "GET", reply.status, reply.body)
    assert reply.body["source"] == "prometheus", reply.body
    assert set(shown) == {n["name"] for n in (await api.get("nodes")).body["nodes"]}
    for name, node in shown.items():
        assert [g["gpu"] for g in node["gpus"]] == [str(g) for g in range(GPUS)]
        assert [g["utilization"] for g in node["gpus"]] == [
            utilization(name, g) for g in range(GPUS)
        ]
        assert node["utilization"] == sum(utilization(name, g) for g in range(GPUS)) / GPUS
        assert node["memory_used_mb"] == sum(memory_used(name, g) for g in range(GPUS))
        assert node["memory_total_mb"] == GPUS * 24576

    # Another job holds GPUs 0-1 of every node: ours gets 2-3 on two of them.
    blocker = subprocess.run(
        [*BLOCKER, "sleep 300"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        cwd=partition,
    ).stdout.strip()
    SUBMITTED.append(blocker)
    job = await api.submit(
        {
            "name": "gpu-slurm",
            "command": ["wait_for_go.py"],
            "workdir": "project",
            "nodes": 2,
            "gpus_per_node": 2,
        }
    )
    SUBMITTED.append(job["backend_id"])
    try:
        running = await api.wait_for(job["id"], {"RUNNING"}, timeout=120)
        nodes = slurm_nodes(job["backend_id"])
        assert len(nodes) == 2 and {r["node"] for r in running["ranks"]} <= set(nodes)
        # Let Prometheus scrape a few times inside the job's run.
        for _ in range(300):
            reply = await api.get(f"jobs/{job['id']}/gpu", step=1)
            points = [len(s["points"]) for s in reply.body["series"]]
            if len(points) == 2 * 2 * 2 and min(points) >= 3:
                break
            await asyncio.sleep(0.2)
        check("/jobs/{job_id}/gpu", "GET", reply.status, reply.body)
    finally:
        (project / "go").write_text("")
    done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"}, timeout=120)
    assert done["state"] == "SUCCEEDED", done

    reply = await api.get(f"jobs/{job['id']}/gpu", step=1)
    check("/jobs/{job_id}/gpu", "GET", reply.status, reply.body)
    body = reply.body
    assert body["source"] == "prometheus" and body["message"] is None, body
    assert body["start"] == done["started"] and body["end"] >= body["start"] + 1
    held = {(node, str(gpu)) for node in nodes for gpu in (2, 3)}
    for metric, value in (("utilization", utilization), ("memory_used_mb", memory_used)):
        series = [s for s in body["series"] if s["metric"] == metric]
        assert {(s["node"], s["gpu"]) for s in series} == held, (metric, series)
        for one in series:
            assert one["points"], one
            assert {v for _, v in one["points"]} == {value(one["node"], int(one["gpu"]))}
            assert all(body["start"] - 0.001 <= t <= body["end"] + 0.001 for t, _ in one["points"])


def test_an_sbatch_job_adopted_while_pending_gets_its_gpus_once_it_runs(
    slurm_cluster: None,
    dcgm_on_every_node: Exporter,
    prometheus: str,  # noqa: F811
    tmp_path: Path,
    fs_root: Path,
    partition: Path,
) -> None:
    """Submitted with `sbatch` in a terminal, opened here while it waits: once Slurm starts it,
    the next refresh asks `scontrol -d` for its GPUs (its output path was known already)."""
    from jupyter_hyperpod.core.models import JobState
    from jupyter_hyperpod.core.service import HyperPodService
    from jupyter_hyperpod.core.settings import HyperPodSettings

    from ..gpu.conftest import wait_until

    def sbatch(*args: str) -> str:
        done = subprocess.run(
            ["sbatch", "--parsable", "-o", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            cwd=partition,
        )
        SUBMITTED.append(done.stdout.strip())
        return done.stdout.strip()

    blocker = sbatch("-N", "4", "--gres=gpu:4", "--wrap", "sleep 300")  # every GPU: mine waits
    mine = sbatch("-N", "1", "--gres=gpu:1", "-J", "terminal-job", "--wrap", "sleep 300")
    service = HyperPodService(
        HyperPodSettings(
            orchestrator="slurm",
            shared_fs_root=str(fs_root),
            partition="shared",
            user="root",  # the user sbatch ran as: only one's own jobs are adopted
            job_store=str(tmp_path / "jobs.sqlite"),
            gpu_metrics_url=prometheus,
        )
    )
    try:
        job = service.adopt(mine)
        assert job.state is JobState.PENDING and job.spec.gpus_per_node == 1
        subprocess.run(["scancel", blocker], check=True, timeout=30)
        wait_until(
            lambda: service.job(job.id).state is JobState.RUNNING, timeout=60, what="it runs"
        )
        (node,) = slurm_nodes(mine)

        def figures() -> Any:
            answer = service.job_gpu(job.id, step=1)
            enough = answer.series and min(len(s.points) for s in answer.series) >= 2
            return answer if enough else None

        answer = wait_until(figures, timeout=60, what="the job's GPU series")
        assert {(s.metric, s.node, s.gpu) for s in answer.series} == {
            ("memory_used_mb", node, "0"),
            ("utilization", node, "0"),
        }
        util = next(s for s in answer.series if s.metric == "utilization")
        assert {v for _, v in util.points} == {utilization(node, 0)}
    finally:
        service.close()
