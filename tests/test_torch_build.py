"""Which torch the demo's venv gets (scripts/torch_build.py, used by scripts/venv.sh): the CPU
build where no GPU is present (PyTorch's CPU index as an extra index, unless pip's own
configuration already serves it), the CUDA build on a GPU machine. Decided here, nothing
downloaded: the inputs are the environment, the platform, nvidia-smi and pip's sources."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "torch_build.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("torch_build", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["torch_build"] = module
    spec.loader.exec_module(module)
    return module


tb = _load()
CPU = "https://download.pytorch.org/whl/cpu"


def no_gpu() -> bool:
    return False


def a_gpu() -> bool:
    return True


def test_no_gpu_on_linux_gets_the_cpu_build_from_pytorch_s_cpu_index() -> None:
    choice = tb.choose({}, "Linux", no_gpu, ["https://pypi.org/simple"])
    assert choice.build == "cpu"
    assert choice.pip_args == ["torch==2.13.0+cpu", "--extra-index-url", CPU]
    assert "no NVIDIA GPU" in choice.why


def test_a_gpu_keeps_pypi_s_cuda_build_exactly() -> None:
    choice = tb.choose({}, "Linux", a_gpu, [])
    assert choice.build == "cuda" and choice.pip_args == ["torch===2.13.0"]


def test_the_switch_overrides_the_detection() -> None:
    assert tb.choose({"HYPERPOD_TORCH": "cuda"}, "Linux", no_gpu, []).build == "cuda"
    forced = tb.choose({"HYPERPOD_TORCH": "CPU"}, "Linux", a_gpu, [])
    assert forced.build == "cpu" and "HYPERPOD_TORCH=cpu" in forced.why
    with pytest.raises(ValueError, match="auto, cpu or cuda, not 'rocm'"):
        tb.choose({"HYPERPOD_TORCH": "rocm"}, "Linux", no_gpu, [])


def test_no_extra_index_when_pip_already_serves_the_cpu_build(tmp_path: Path) -> None:
    """A wheel directory (find-links), a local simple index or a configured CPU index: the CPU
    index is not added (it may be unreachable from there)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    index = tmp_path / "simple"
    (index / "torch").mkdir(parents=True)
    (index / "torch" / "torch-2.13.0+cpu-cp312-cp312-manylinux_2_28_aarch64.whl").write_bytes(b"")
    for source in (str(wheels), f"file://{index}", "https://mirror.example/pytorch/whl/cpu/"):
        choice = tb.choose({}, "Linux", no_gpu, ["https://pypi.org/simple", source])
        assert choice.pip_args == ["torch==2.13.0+cpu"], source
        assert source in choice.why


def test_another_version_or_the_cuda_build_in_a_wheel_directory_is_not_enough(
    tmp_path: Path,
) -> None:
    (tmp_path / "torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    choice = tb.choose({}, "Linux", no_gpu, [str(tmp_path), str(tmp_path / "absent")])
    assert choice.pip_args[1:] == ["--extra-index-url", CPU]


def test_the_cpu_index_can_be_moved_or_turned_off() -> None:
    moved = tb.choose({"HYPERPOD_TORCH_CPU_INDEX": "https://m/cpu"}, "Linux", no_gpu, [])
    assert moved.pip_args == ["torch==2.13.0+cpu", "--extra-index-url", "https://m/cpu"]
    off = tb.choose({"HYPERPOD_TORCH_CPU_INDEX": ""}, "Linux", no_gpu, [])
    assert off.pip_args == ["torch==2.13.0+cpu"]


def test_macos_has_no_cuda_build_to_avoid() -> None:
    choice = tb.choose({}, "Darwin", no_gpu, [])
    assert choice.pip_args == ["torch==2.13.0"]


def test_pip_s_sources_are_read_from_its_config_list() -> None:
    listed = (
        ":env:.default-timeout='180'\n"
        ":env:.find-links='/opt/wheels'\n"
        "global.cert='/etc/ssl/certs/ca-certificates.crt'\n"
        "global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'\n"
        "user.index-url='https://proxy.example/simple'\n"
    )
    assert tb.pip_sources(listed) == [
        "/opt/wheels",
        "file:///opt/pypi/simple",
        "file:///opt/pypi-more/simple",
        "https://proxy.example/simple",
    ]


def test_a_gpu_is_what_nvidia_smi_lists() -> None:
    def answer(code: int, out: str) -> object:
        return lambda *a, **k: subprocess.CompletedProcess(a, code, out, "")

    def missing(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError("nvidia-smi")

    assert tb.has_nvidia_gpu(answer(0, "GPU 0: NVIDIA H200 (UUID: GPU-1)\n"))
    assert not tb.has_nvidia_gpu(answer(0, "No devices found.\n"))
    assert not tb.has_nvidia_gpu(answer(9, "NVIDIA-SMI has failed\n"))
    assert not tb.has_nvidia_gpu(missing)


def test_the_installed_build_is_compared_with_the_choice() -> None:
    assert tb.installed_is("cpu", "2.13.0+cpu", "Linux")
    assert not tb.installed_is("cuda", "2.13.0+cpu", "Linux")  # venv.sh removes it first
    assert tb.installed_is("cuda", "2.13.0", "Linux")
    assert not tb.installed_is("cpu", "2.13.0", "Linux")
    assert not tb.installed_is("cpu", "2.12.0+cpu", "Linux")
    assert not tb.installed_is("cpu", None, "Linux")
    assert tb.installed_is("cpu", "2.13.0", "Darwin")


def test_the_script_here_keeps_pip_s_configured_build() -> None:
    """On this machine (its pip serves the CPU build), as venv.sh runs it."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HYPERPOD_TORCH": "cpu"},
    )
    assert done.returncode == 0, done.stderr
    build, state, *args = done.stdout.splitlines()
    assert build == "cpu" and state in ("ok", "install", "remove")
    assert args[0] == "torch==2.13.0+cpu"
    assert "==> torch: HYPERPOD_TORCH=cpu" in done.stderr
