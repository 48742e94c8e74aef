"""How a job's command becomes processes: shared by every backend so that previews agree."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from .errors import InvalidRequest
from .models import JobSpec

#: The interpreter a script's extension implies; anything else is executed as it is.
INTERPRETED = {".py": "the job's Python", ".sh": "bash"}


def program_argv(command: Sequence[str], python: str) -> list[str]:
    """The argv to execute for one rank: a `.py` script runs under `python`, a `.sh` script under
    bash (executable or not, as `bash x.sh` would), anything else as it is."""
    argv = list(command)
    if argv[0].endswith(".py"):
        return [python, *argv]
    if argv[0].endswith(".sh"):
        return ["bash", *argv]
    return argv


def check_program(path: Path, shown: str, field: str) -> None:
    """A rank can start `path` as `program_argv` would: a file, executable unless its extension
    names an interpreter (without this, the job is accepted and every rank fails "Permission
    denied"). The one place these messages are written: REST, the panel, the CLI and the magics
    all submit through it."""
    if path.is_dir():
        raise InvalidRequest(
            f"'{shown}' is a directory: choose the script or program inside it", field=field
        )
    if not path.exists():
        return  # must_exist says it, where the template asks for it
    if not path.name.endswith(tuple(INTERPRETED)) and not os.access(path, os.X_OK):
        raise InvalidRequest(
            f"'{shown}' is not executable: make it so (chmod +x {shlex.quote(shown)}), "
            "or name it .py to run it with the job's Python or .sh to run it with bash",
            field=field,
        )


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
        if program[0].endswith(".sh"):
            program = ["bash", *program]
    return argv + program


def shell_join(argv: Sequence[str]) -> str:
    """Quote for a shell script (sbatch, container `bash -c`): every user string goes through here."""
    return shlex.join(list(argv))
