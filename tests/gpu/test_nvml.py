"""The local backend's NVML reader through the real pynvml (nvidia-ml-py), on a machine without an
NVIDIA driver: pynvml loads a stand-in for libnvidia-ml.so.1 built here from fake_nvml.c (NVML's C
signatures, structs and return codes, from nvml.h) and calls it through ctypes as it calls the
driver's library, so its wrappers, structs (c_nvmlUtilization_t, c_nvmlMemory_t) and error classes
are the real ones. No GPU was lent to this project: on a GPU machine
test_rest.py::test_the_local_reader_finds_what_this_machine_has reads the real one."""

from __future__ import annotations

import ctypes
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.gpu import GpuMetrics
from jupyter_hyperpod.gpu.local import LocalGpus, NvmlReader

SOURCE = Path(__file__).with_name("fake_nvml.c")
MIB = 1024 * 1024


@pytest.fixture
def nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    """pynvml with the stand-in library loaded where it keeps the driver's (`pynvml.nvmlLib`)."""
    pynvml = pytest.importorskip("pynvml")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the NVML stand-in (apt-get install gcc)")
    library = tmp_path / "libnvidia-ml.so.1"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(library), str(SOURCE)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    fake = ctypes.CDLL(str(library))
    monkeypatch.setattr(pynvml, "nvmlLib", fake)
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
    yield pynvml, fake


def test_the_stand_in_answers_as_nvml_does_before_and_after_init(nvml: tuple[Any, Any]) -> None:
    pynvml, _ = nvml
    with pytest.raises(pynvml.NVMLError_Uninitialized) as raised:
        pynvml.nvmlDeviceGetCount()
    assert str(raised.value) == "Uninitialized"  # nvmlErrorString, through pynvml
    pynvml.nvmlInit()
    try:
        assert pynvml.nvmlDeviceGetCount() == 2
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetHandleByIndex(2)
        handle = pynvml.nvmlDeviceGetHandleByIndex(1)
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetPowerUsage(handle)
        assert pynvml.nvmlDeviceGetName(handle) == "NVIDIA A10G"  # str: nvidia-ml-py decodes
    finally:
        pynvml.nvmlShutdown()


def test_the_reader_turns_nvml_into_gpu_figures(nvml: tuple[Any, Any]) -> None:
    pynvml, _ = nvml
    first, second = NvmlReader(pynvml).read()
    assert (first.gpu, first.model, first.uuid) == (
        "0",
        "NVIDIA H100 80GB HBM3",
        "GPU-5c1e4f8a-8f2b-3b1c-9d3e-4c2a1b0f9e8d",
    )
    assert (first.utilization, first.memory_used_mb, first.memory_total_mb) == (87, 40960, 81559)
    assert (first.power_w, first.temperature_c) == (612.34, 58)  # milliwatts -> W
    # No power sensor on the second board: that figure is missing, the others are there.
    assert (second.gpu, second.power_w, second.utilization, second.temperature_c) == (
        "1",
        None,
        3,
        30,
    )
    assert (second.memory_used_mb, second.memory_total_mb) == (512, 23028)


def test_the_local_backend_samples_nvml_for_the_nodes_and_jobs_views(
    nvml: tuple[Any, Any],
) -> None:
    _, fake = nvml
    gpus = LocalGpus(prefer="nvml")
    assert gpus.available and gpus.source == "nvml"
    assert [d.utilization for d in gpus.read()] == [87, 3]
    assert fake.fake_nvml_set_utilization(0, 50) == 0
    assert [d.utilization for d in gpus.read()] == [50, 3]
    series = {(s.metric, s.gpu): s for s in gpus.series("node-a", 0, 1e12, gpus=["0"])}
    assert set(series) == {("utilization", "0"), ("memory_used_mb", "0")}
    assert [v for _, v in series[("utilization", "0")].points] == [87, 50]

    metrics = GpuMetrics(
        HyperPodSettings(config=Config({"HyperPodSettings": {"gpu_local": "nvml"}}))
    )
    try:
        found = metrics.nodes(this_machine=True)
        assert found.source == "nvml" and found.message is None
        (node,) = found.nodes
        assert node.node == socket.gethostname() and [g.gpu for g in node.gpus] == ["0", "1"]
        assert node.utilization == (50 + 3) / 2
        assert node.memory_total_mb == 81559 + 23028
        assert metrics.check(this_machine=True)[0] == "pass"
    finally:
        metrics.close()
