"""Which rank a failed job failed on: decided once, here, from the facts the backends report.

The panel, the CLI and the agent interface display `Job.failed_rank`; none of them decides it
again or reads it out of a reason's words. The facts, strongest first: the fault the orchestrator
recorded for the final failure (HyperPod's faulty rank, the Slurm rank shell's records); the
failed rank that ended first, where the backend knows when each ended (the local runner's exit
times, Kubernetes' `finishedAt`, the Slurm records), a tie going to the rank that failed on its
own; else the lowest rank that failed on its own; else the lowest that failed at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

STOPPED_CODES = frozenset({143, 137, -15, -9})
"""Exit codes of a rank stopped by its launcher after another rank failed: SIGTERM and SIGKILL
as a shell reports them (128 + n) and as Python's subprocess does (-n)."""

_FAILED_STATE = re.compile(r"fail|error|oom", re.IGNORECASE)


class _Fault(Protocol):
    @property
    def restart(self) -> int | None: ...


class _Rank(Protocol):
    @property
    def rank(self) -> int: ...
    @property
    def state(self) -> str | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def ended(self) -> float | None: ...
    @property
    def faults(self) -> Sequence[_Fault]: ...


def stopped_by_launcher(rank: _Rank) -> bool:
    return rank.exit_code is not None and rank.exit_code in STOPPED_CODES


def _first_ended(ranks: Sequence[_Rank]) -> _Rank | None:
    timed = [rank for rank in ranks if rank.ended is not None]
    if not timed:
        return None
    return min(timed, key=lambda r: (r.ended, stopped_by_launcher(r), r.rank))


def failed_rank(failed: bool, ranks: Sequence[_Rank]) -> int | None:
    """The rank a failed job failed on first; None when it did not fail or no rank is to blame."""
    if not failed:
        return None
    faulty = [rank for rank in ranks if any(fault.restart is None for fault in rank.faults)]
    if faulty:
        return (_first_ended(faulty) or faulty[0]).rank
    broken = [
        rank
        for rank in ranks
        if (rank.exit_code is not None and rank.exit_code != 0)
        or _FAILED_STATE.search(rank.state or "")
    ]
    timed = _first_ended(broken)
    if timed is not None:
        return timed.rank
    own = [rank for rank in broken if not stopped_by_launcher(rank)]
    chosen = own or broken
    return chosen[0].rank if chosen else None
