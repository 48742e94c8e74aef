"""How and when each rank's program ended, as the rank shell of the job's script recorded it.

Slurm keeps one end time and one exit code per step, the same for all of its tasks, so the rank
shell (`script.RANK_RUN`) writes `rank-<N>.exit` ("<exit code> <Unix time>") beside the rank
logs. A rank killed by SIGKILL (srun's `--kill-on-bad-exit`, the end of KillWait, the OOM
killer) takes its shell with it and leaves no record. The times come from each node's clock.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from .script import RANK_EXIT_SUFFIX

_RECORD_NAME = re.compile(r"rank-(\d+)" + re.escape(RANK_EXIT_SUFFIX))
# A launcher's stop after another rank failed: SIGTERM, SIGKILL (shell convention 128+N).
STOPPED_CODES = frozenset({143, 137})


@dataclass(frozen=True)
class RankExit:
    code: int
    ended: float


def parse_rank_exit(text: str) -> RankExit | None:
    """ "3 1796137080.807092" -> RankExit(3, 1796137080.807092); None for anything else."""
    parts = text.split()
    if len(parts) != 2:
        return None
    try:
        # EPOCHREALTIME uses the locale's decimal point, which may be a comma.
        return RankExit(code=int(parts[0]), ended=float(parts[1].replace(",", ".")))
    except ValueError:
        return None


def read_rank_exits(job_dir: str, world_size: int) -> dict[int, RankExit]:
    """The records in a job directory (one listing, then only the files that are there)."""
    found: dict[int, RankExit] = {}
    try:
        entries = list(os.scandir(job_dir))
    except OSError:
        return found
    for entry in entries:
        match = _RECORD_NAME.fullmatch(entry.name)
        if not match or int(match.group(1)) >= world_size:
            continue
        try:
            with open(entry.path, encoding="utf-8") as record:
                parsed = parse_rank_exit(record.read(200))
        except OSError:
            continue
        if parsed is not None:
            found[int(match.group(1))] = parsed
    return found


def first_failure(exits: dict[int, RankExit]) -> tuple[int, RankExit] | None:
    """The failed rank that ended first; at the same time, one that failed on its own."""
    failed = [(rank, done) for rank, done in exits.items() if done.code != 0]
    if not failed:
        return None
    return min(failed, key=lambda item: (item[1].ended, item[1].code in STOPPED_CODES, item[0]))
