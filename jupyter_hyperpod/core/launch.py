"""How a job's command becomes processes: shared by every backend so that previews agree."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from .models import JobSpec


def program_argv(command: Sequence[str], python: str) -> list[str]:
    """The argv to execute for one rank: a `.py` script runs under `python`."""
    argv = list(command)
    if argv[0].endswith(".py"):
        return [python, *argv]
    return argv


def uses_torchrun(spec: JobSpec, *, multi_node_cluster: bool) -> bool:
    if spec.launcher == "torchrun":
        return True
    if spec.launcher == "plain":
        return False
    return multi_node_cluster and spec.world_size > 1


def torchrun_argv(
    command: Sequence[str],
    *,
    nnodes: int | str,
    nproc_per_node: int | str,
    rdzv_endpoint: str | None,
    node_rank: str | None = None,
    max_restarts: int = 0,
    torchrun: str = "torchrun",
) -> list[str]:
    """torchrun with a static (c10d) rendezvous; non-Python programs run with --no-python."""
    argv = [torchrun, f"--nnodes={nnodes}", f"--nproc-per-node={nproc_per_node}"]
    if rdzv_endpoint:
        argv += ["--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}"]
    if node_rank is not None:
        argv.append(f"--node-rank={node_rank}")
    if max_restarts:
        argv.append(f"--max-restarts={max_restarts}")
    program = list(command)
    if not program[0].endswith(".py"):
        argv.append("--no-python")
    return argv + program


def shell_join(argv: Sequence[str]) -> str:
    """Quote for a shell script (sbatch, container `bash -c`): every user string goes through here."""
    return shlex.join(list(argv))
