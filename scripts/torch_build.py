"""Which build of torch the venv gets (scripts/venv.sh): pip's arguments for it, one per line.

On Linux, PyPI's `torch` is the CUDA build (~2.7 GB of NVIDIA wheels); the demo trains on the
CPU where no GPU is present, so there the CPU build comes from PyTorch's CPU index, added as an
extra index only when pip's own configuration does not already serve it (a mirror, a wheel
directory: that index may be the only one reachable). A GPU machine keeps the CUDA build.

    HYPERPOD_TORCH=auto|cpu|cuda    auto (default): cuda when `nvidia-smi -L` lists a GPU
    HYPERPOD_TORCH_CPU_INDEX=URL    where the CPU build comes from ('' : pip's own indexes only)

Standard library only: it runs before the project is installed.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

VERSION = "2.13.0"
TORCH = f"torch=={VERSION}"
TORCH_CPU = f"torch=={VERSION}+cpu"
"""The CPU build's own version: pip does not take it for the CUDA build already installed."""
TORCH_CUDA = f"torch==={VERSION}"
"""Exactly PyPI's version: not a +cpu build that pip's configuration may also serve."""
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
SOURCE_KEYS = ("index-url", "extra-index-url", "find-links")
"""pip's options that say where packages come from."""


@dataclass(frozen=True)
class Choice:
    build: str
    """'cpu' or 'cuda'."""
    pip_args: list[str]
    why: str


def has_nvidia_gpu(run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> bool:
    """Whether the NVIDIA driver lists a GPU (`nvidia-smi -L` prints 'GPU 0: ...')."""
    try:
        listed = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and re.search(r"^GPU \d+", listed.stdout, re.M) is not None


def pip_sources(config_list: str) -> list[str]:
    """Every index and wheel directory in `pip config list`'s output (files and PIP_* env)."""
    sources: list[str] = []
    for line in config_list.splitlines():
        key, _, value = line.partition("=")
        if key.rsplit(".", 1)[-1].strip() in SOURCE_KEYS:
            sources.extend(shlex.split(value.strip().strip("'\"")))
    return sources


def _local_dir(source: str) -> Path | None:
    parsed = urlparse(source)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "":
        return Path(source)
    return None


def serves_cpu_torch(sources: Iterable[str], version: str = VERSION) -> str | None:
    """The configured source that already gives the CPU build, if one does: PyTorch's CPU index
    (or a mirror of it at a .../whl/cpu path), or a local index or wheel directory holding
    torch-VERSION+cpu. Remote indexes are not asked (they may not be reachable)."""
    wheel = re.compile(rf"^torch-{re.escape(version)}\+cpu-.*\.whl$")
    for source in sources:
        if source.rstrip("/").endswith("/whl/cpu"):
            return source
        directory = _local_dir(source)
        if directory is None:
            continue
        for candidate in (directory, directory / "torch"):  # a wheel directory, a simple index
            try:
                if any(wheel.match(entry.name) for entry in candidate.iterdir()):
                    return source
            except OSError:
                continue
    return None


def choose(
    env: Mapping[str, str], system: str, gpu: Callable[[], bool], sources: Iterable[str]
) -> Choice:
    mode = env.get("HYPERPOD_TORCH", "auto").strip().lower() or "auto"
    if mode not in ("auto", "cpu", "cuda"):
        raise ValueError(f"HYPERPOD_TORCH must be auto, cpu or cuda, not '{mode}'")
    if mode == "auto":
        found = gpu()
        mode = "cuda" if found else "cpu"
        why = "nvidia-smi lists a GPU" if found else "no NVIDIA GPU (nvidia-smi lists none)"
    else:
        why = f"HYPERPOD_TORCH={mode}"
    if mode == "cuda":
        return Choice("cuda", [TORCH_CUDA], f"{why}: PyPI's build, with CUDA")
    if system not in ("Linux", "Windows"):
        return Choice("cpu", [TORCH], f"{why}: PyPI's {system} build has no CUDA")
    configured = serves_cpu_torch(sources)
    if configured is not None:
        return Choice(
            "cpu", [TORCH_CPU], f"{why}: the CPU build, from pip's configured {configured}"
        )
    index = env.get("HYPERPOD_TORCH_CPU_INDEX", CPU_INDEX).strip()
    if not index:
        return Choice(
            "cpu",
            [TORCH_CPU],
            f"{why}: the CPU build from pip's own indexes (HYPERPOD_TORCH_CPU_INDEX='')",
        )
    return Choice(
        "cpu", [TORCH_CPU, "--extra-index-url", index], f"{why}: the CPU build, from {index}"
    )


def installed_is(build: str, installed: str | None, system: str) -> bool:
    """Whether the venv's torch (its version, None when absent) is the build chosen."""
    if installed is None or installed.split("+")[0] != VERSION:
        return False
    if system not in ("Linux", "Windows"):
        return True
    return installed.endswith("+cpu") == (build == "cpu")


def _installed() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return None


def main() -> int:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    )
    try:
        choice = choose(os.environ, platform.system(), has_nvidia_gpu, pip_sources(listed.stdout))
    except ValueError as error:
        print(f"!! {error}", file=sys.stderr)
        return 2
    installed = _installed()
    print(f"==> torch: {choice.why} (HYPERPOD_TORCH=cpu|cuda to choose)", file=sys.stderr)
    # venv.sh reads: the build, whether the venv has another torch to remove, pip's arguments.
    print(choice.build)
    same = installed_is(choice.build, installed, platform.system())
    print("remove" if installed is not None and not same else ("ok" if same else "install"))
    print("\n".join(choice.pip_args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
