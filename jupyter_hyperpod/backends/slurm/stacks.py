"""Python stacks of a Slurm job's ranks: one probe per node of the allocation, run inside it with
`srun --overlap --jobid` (srun(1): "--overlap: Allow steps to overlap each other on the same
resources", so it runs next to the job's own step, not after it): the probe of core/stacks.py.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...core.models import RankStack
from ...core.stacks import DUMP_TIMEOUT_S, PROBE, read_probe

if TYPE_CHECKING:
    from ...core.backend import StoredJob
    from .backend import SlurmOrchestrator

_LABEL = re.compile(r"^\s*(\d+): ")
"""srun --label's prefix: the task number."""


def dump_stacks(backend: SlurmOrchestrator, job: StoredJob) -> dict[int, RankStack]:
    """Every rank's stack that a probe found, by rank (one srun step over the job's nodes)."""
    nodes = max(1, int(job.spec.nodes))
    done = backend.commands.run(
        "srun",
        [
            "--overlap",
            f"--jobid={job.backend_id}",
            f"--nodes={nodes}",
            "--ntasks-per-node=1",
            # Each piece of output prefixed with its task's number: the tasks' long JSON lines
            # come in pieces that can interleave.
            "--label",
            "--quiet",
            backend.settings.cluster_python,
            "-c",
            PROBE,
            job.id,
            f"{DUMP_TIMEOUT_S:g}",
        ],
        timeout=DUMP_TIMEOUT_S * 3,
        ok_codes=(0,),
    )
    # srun forwards long lines in pieces, each labelled: a task's pieces, in order, are its one
    # JSON line (the probe escapes every newline inside it).
    by_task: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        found = _LABEL.match(line)
        if found:
            by_task.setdefault(found.group(1), []).append(line[found.end() :])
    return read_probe("\n".join("".join(pieces) for pieces in by_task.values()))
