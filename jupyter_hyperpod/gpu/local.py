"""This machine's GPUs, read with NVML (`nvidia-ml-py`, optional) or `nvidia-smi`, and a small
sampler that keeps their recent history for the local backend's job views. No GPU, no driver or
neither tool: no figures and no error."""

from __future__ import annotations

import collections
import logging
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from ..core.gpu_models import GpuDevice, GpuSeries, GpuSource

log = logging.getLogger(__name__)

SMI_FIELDS = "index,uuid,name,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu"
SMI_TIMEOUT = 10.0
MIB = 1024 * 1024


def _float(text: str) -> float | None:
    """An nvidia-smi CSV value ('[N/A]', '[Not Supported]' when the GPU has no such sensor)."""
    try:
        return float(text.strip())
    except ValueError:
        return None


def parse_smi_csv(text: str) -> list[GpuDevice]:
    """`nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits` as devices."""
    devices = []
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 8 or not parts[0].isdigit():
            continue
        index, uuid, name, util, used, total, power, temp = parts
        devices.append(
            GpuDevice(
                gpu=index,
                uuid=uuid or None,
                model=name or None,
                utilization=_float(util),
                memory_used_mb=_float(used),
                memory_total_mb=_float(total),
                power_w=_float(power),
                temperature_c=_float(temp),
            )
        )
    return devices


def read_smi(executable: str) -> list[GpuDevice]:
    try:
        done = subprocess.run(
            [executable, f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=SMI_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        log.debug("nvidia-smi failed: %s", error)
        return []
    return parse_smi_csv(done.stdout) if done.returncode == 0 else []


class NvmlReader:
    """NVML through pynvml (PyPI `nvidia-ml-py`): one init, then a cheap read per call."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        nvml.nvmlInit()
        self.handles = [
            nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())
        ]

    def _try(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except self.nvml.NVMLError:
            return None  # the sensor is not supported on this GPU

    def read(self) -> list[GpuDevice]:
        nvml = self.nvml
        devices = []
        for index, handle in enumerate(self.handles):
            rates = self._try(nvml.nvmlDeviceGetUtilizationRates, handle)
            memory = self._try(nvml.nvmlDeviceGetMemoryInfo, handle)
            power = self._try(nvml.nvmlDeviceGetPowerUsage, handle)  # milliwatts
            temp = self._try(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
            name = self._try(nvml.nvmlDeviceGetName, handle)
            uuid = self._try(nvml.nvmlDeviceGetUUID, handle)
            devices.append(
                GpuDevice(
                    gpu=str(index),
                    uuid=_text(uuid),
                    model=_text(name),
                    utilization=float(rates.gpu) if rates is not None else None,
                    memory_used_mb=memory.used / MIB if memory is not None else None,
                    memory_total_mb=memory.total / MIB if memory is not None else None,
                    power_w=power / 1000.0 if power is not None else None,
                    temperature_c=float(temp) if temp is not None else None,
                )
            )
        return devices


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


class LocalGpus:
    """The GPUs of this machine, and their history since the sampler started."""

    def __init__(
        self, *, prefer: str = "auto", interval: float = 5.0, keep_seconds: float = 6 * 3600
    ) -> None:
        self.source: GpuSource | None = None
        self._read: Callable[[], list[GpuDevice]] | None = None
        if prefer in ("auto", "nvml"):
            self._open_nvml()
        if self._read is None and prefer in ("auto", "nvidia-smi"):
            smi = shutil.which("nvidia-smi")
            if smi and read_smi(smi):
                self.source, self._read = "nvidia-smi", lambda: read_smi(smi)
        self.interval = interval
        self._history: collections.deque[tuple[float, list[GpuDevice]]] = collections.deque(
            maxlen=max(1, int(keep_seconds / interval))
        )
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _open_nvml(self) -> None:
        try:
            import pynvml
        except ImportError:
            return
        try:
            reader = NvmlReader(pynvml)
        except Exception as error:  # NVMLError_LibraryNotFound, DriverNotLoaded...
            log.debug("NVML unavailable: %s", error)
            return
        if reader.handles:
            self.source, self._read = "nvml", reader.read

    @property
    def available(self) -> bool:
        return self._read is not None

    def read(self) -> list[GpuDevice]:
        if self._read is None:
            return []
        devices = self._read()
        with self._lock:
            self._history.append((time.time(), devices))
        return devices

    def start(self) -> None:
        """Sample in the background (daemon thread) so that jobs have a GPU history."""
        if self._read is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="hyperpod-gpu", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.read()
            except Exception:  # a flaky driver read must not kill the sampler
                log.debug("GPU sample failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()

    def series(
        self, node: str, start: float, end: float, gpus: list[str] | None = None
    ) -> list[GpuSeries]:
        with self._lock:
            samples = [(t, d) for t, d in self._history if start <= t <= end]
        found: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for moment, devices in samples:
            for device in devices:
                if gpus and device.gpu not in gpus:
                    continue
                for metric in ("utilization", "memory_used_mb"):
                    value = getattr(device, metric)
                    if value is not None:
                        found.setdefault((metric, device.gpu), []).append((moment, value))
        return [
            GpuSeries(metric=metric, node=node, gpu=gpu, points=points)  # type: ignore[arg-type]
            for (metric, gpu), points in sorted(found.items())
        ]
