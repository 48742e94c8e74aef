"""GET /gpu/nodes and GET /jobs/{id}/gpu on a real Jupyter server, against the document; a local
job's GPU series come from the real Prometheus by the job's node."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.gpu.local import parse_smi_csv

from ..helpers import Api
from ..test_contract import check
from .conftest import Exporter, wait_until


@pytest.fixture
def hyperpod_config(
    hyperpod_config: dict[str, Any], request: pytest.FixtureRequest
) -> dict[str, Any]:
    if "prometheus" in request.fixturenames:
        hyperpod_config["gpu_metrics_url"] = request.getfixturevalue("prometheus")
    return hyperpod_config


async def test_nodes_and_a_local_jobs_series_through_prometheus(
    api: Api, partition: Path, prometheus: str, exporter: Exporter
) -> None:
    host = socket.gethostname()
    exporter.set(host, 0, utilization=55, memory_used_mb=4096, memory_free_mb=77824)
    try:
        import asyncio

        for _ in range(100):
            reply = await api.get("gpu/nodes")
            if any(
                n["node"] == host and n["gpus"][0]["utilization"] == 55 for n in reply.body["nodes"]
            ):
                break
            await asyncio.sleep(0.2)
        check("/gpu/nodes", "GET", reply.status, reply.body)
        assert reply.body["source"] == "prometheus"
        node = next(node for node in reply.body["nodes"] if node["node"] == host)
        assert node["gpus"][0]["utilization"] == 55 and node["memory_total_mb"] == 81920

        (partition / "work.py").write_text("import time\ntime.sleep(3)\n")
        job = await api.submit({"name": "gpu-job", "command": ["work.py"]})
        await api.wait_for(job["id"], {"SUCCEEDED"})
        reply = await api.get(f"jobs/{job['id']}/gpu", step=1)
        check("/jobs/{job_id}/gpu", "GET", reply.status, reply.body)
        util = [s for s in reply.body["series"] if s["metric"] == "utilization"]
        assert util and util[0]["node"] == host and {v for _, v in util[0]["points"]} == {55}
        # Prometheus evaluates at start + k * step (start sent to the millisecond).
        assert reply.body["step"] == 1 and reply.body["start"] - 0.001 <= util[0]["points"][0][0]
    finally:
        exporter.remove(host)


async def test_bad_step_and_unknown_job(api: Api) -> None:
    reply = await api.get("jobs/nope-123456/gpu", step="x")
    assert reply.status == 400 and reply.body["error"]["field"] == "step"
    check("/jobs/{job_id}/gpu", "GET", reply.status, reply.body)
    reply = await api.get("jobs/nope-123456/gpu", step=0)
    assert reply.status == 400 and reply.body["error"]["field"] == "step"
    reply = await api.get("jobs/nope-123456/gpu")
    assert reply.status == 404
    check("/jobs/{job_id}/gpu", "GET", reply.status, reply.body)


async def test_local_backend_without_a_gpu_shows_nothing_and_no_error(api: Api) -> None:
    """This test machine has no NVIDIA GPU (no driver, no nvidia-smi): no figures, a reason."""
    reply = await api.get("gpu/nodes")
    assert reply.status == 200
    check("/gpu/nodes", "GET", reply.status, reply.body)
    if reply.body["source"] is None:
        assert (
            reply.body["nodes"] == [] and reply.body["message"] == "no NVIDIA GPU on this machine"
        )
    else:  # a machine with a GPU: NVML or nvidia-smi reads it
        assert reply.body["nodes"] and reply.body["nodes"][0]["gpus"]


def test_nvidia_smi_csv_with_unsupported_sensors() -> None:
    """The output format of `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`."""
    text = (
        "0, GPU-5c1e4f8a-8f2b-3b1c-9d3e-4c2a1b0f9e8d, NVIDIA H200, 87, 101234, 143771, 612.34, 58\n"
        "1, GPU-0a1b2c3d-0000-1111-2222-333344445555, NVIDIA A10G, [N/A], 0, 23028, [N/A], 30\n"
        "No devices were found\n"
    )
    first, second = parse_smi_csv(text)
    assert (first.gpu, first.model, first.utilization, first.power_w) == (
        "0",
        "NVIDIA H200",
        87,
        612.34,
    )
    assert (first.memory_used_mb, first.memory_total_mb, first.temperature_c) == (
        101234,
        143771,
        58,
    )
    assert second.utilization is None and second.power_w is None and second.memory_used_mb == 0


def test_the_local_reader_finds_what_this_machine_has() -> None:
    """NVML or nvidia-smi where a GPU is; nothing (and no exception) where none is."""
    import shutil

    from jupyter_hyperpod.gpu.local import LocalGpus

    gpus = LocalGpus()
    has_smi = shutil.which("nvidia-smi") is not None
    try:
        import pynvml  # noqa: F401

        has_nvml = True
    except ImportError:
        has_nvml = False
    if not (has_smi or has_nvml):
        assert not gpus.available and gpus.read() == [] and gpus.series("h", 0, 1e12) == []
    elif gpus.available:
        devices = gpus.read()
        assert devices and all(d.memory_total_mb for d in devices)
        wait_until(lambda: gpus.read(), what="a second sample")
        assert gpus.series(socket.gethostname(), 0, 1e12)


async def test_the_python_client_reads_the_same_figures(
    jp_serverapp: Any, jp_fetch: Any, partition: Path, prometheus: str, exporter: Exporter
) -> None:
    import asyncio

    from jupyter_hyperpod.client import HyperPodClient
    from jupyter_hyperpod.core.errors import InvalidRequest, NotFound

    client = HyperPodClient(jp_serverapp.connection_url, jp_serverapp.identity_provider.token)
    loop = asyncio.get_running_loop()

    async def off_loop(function: Any, *args: Any, **kwargs: Any) -> Any:
        return await loop.run_in_executor(None, lambda: function(*args, **kwargs))

    host = socket.gethostname()
    exporter.set(host, 0, utilization=12)
    try:
        for _ in range(100):
            nodes = await off_loop(client.gpu_nodes)
            if any(n.node == host and n.gpus[0].utilization == 12 for n in nodes.nodes):
                break  # (an earlier test's figure for this host may still be there a moment)
            await asyncio.sleep(0.2)
        assert nodes.source == "prometheus"
        assert next(n for n in nodes.nodes if n.node == host).gpus[0].utilization == 12
        (partition / "work.py").write_text("import time\ntime.sleep(2)\n")
        job = await off_loop(client.submit, name="gpu-client", command=["work.py"])
        await off_loop(client.wait, job.id, timeout=60)
        series = await off_loop(client.job_gpu, job.id, step=1)
        assert series.step == 1 and any(s.metric == "utilization" for s in series.series)
        with pytest.raises(InvalidRequest):
            await off_loop(client.job_gpu, job.id, step=0)
        with pytest.raises(NotFound):
            await off_loop(client.job_gpu, "nope-123456")
    finally:
        exporter.remove(host)
