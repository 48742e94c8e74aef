"""Each rank's runs as the rank shell of the job's script recorded them: when the program started,
how and when it ended. Which rank failed first, and the ranks' restarts.

Slurm keeps one end time and one exit code per step, the same for all of its tasks, and nothing of
the restarts inside it, so the rank shell (`script.RANK_RUN`) appends to `rank-<N>.runs` beside the
rank logs: `start - <Unix time>` before the program, `end <exit code> <Unix time>` after it. A
rank's n-th start is the job's attempt n: torchrun (`--max-restarts`) restarts every rank of the
job together, HyperPod's `srun --auto-resume=1` the whole step, a requeue the whole job. A rank
killed by SIGKILL (srun's `--kill-on-bad-exit` after KillWait, the OOM killer) takes its shell
with it: that run has a start and no end. The times come from each node's clock.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ...core.blame import STOPPED_CODES
from ...core.models import JobState, RankFault, RankInfo
from .script import RANK_RUNS_SUFFIX, rank_runs_name

_RECORD_NAME = re.compile(r"rank-(\d+)" + re.escape(RANK_RUNS_SUFFIX))
_MAX_READ = 1 << 20  # 30 bytes a line: a rank restarted ~17,000 times


@dataclass(frozen=True)
class RankEnd:
    code: int
    ended: float


@dataclass
class RankRuns:
    """One rank's runs, oldest first: run n is the job's attempt n (0 = the first)."""

    starts: list[float] = field(default_factory=list)
    ends: list[RankEnd | None] = field(default_factory=list)
    """Each run's end; None while it runs, or when the rank was killed without one."""

    @property
    def restarts(self) -> int:
        return max(0, len(self.starts) - 1)

    def end_of(self, attempt: int) -> RankEnd | None:
        return self.ends[attempt] if 0 <= attempt < len(self.ends) else None


def parse_rank_runs(text: str) -> RankRuns:
    """The lines of one record; a malformed line (a node that crashed mid-write) is skipped."""
    runs = RankRuns()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[0] not in ("start", "end"):
            continue
        try:
            # EPOCHREALTIME uses the locale's decimal point, which may be a comma.
            when = float(parts[2].replace(",", "."))
            code = int(parts[1]) if parts[0] == "end" else None
        except ValueError:
            continue
        if code is None:
            runs.starts.append(when)
            runs.ends.append(None)
        elif runs.ends and runs.ends[-1] is None:
            runs.ends[-1] = RankEnd(code=code, ended=when)
    return runs


def read_rank_runs(job_dir: str, world_size: int) -> dict[int, RankRuns]:
    """The records in a job directory (one listing, then only the files that are there)."""
    found: dict[int, RankRuns] = {}
    try:
        entries = list(os.scandir(job_dir))
    except OSError:
        return found
    for entry in entries:
        match = _RECORD_NAME.fullmatch(entry.name)
        if not match or int(match.group(1)) >= world_size:
            continue
        try:
            with open(entry.path, encoding="utf-8", errors="replace") as record:
                runs = parse_rank_runs(record.read(_MAX_READ))
        except OSError:
            continue
        if runs.starts:
            found[int(match.group(1))] = runs
    return found


def attempts(runs: dict[int, RankRuns]) -> int:
    """How many times the job's ranks have been started (1 + its restarts); 0: none recorded."""
    return max((len(r.starts) for r in runs.values()), default=0)


def first_failure(runs: dict[int, RankRuns], attempt: int) -> tuple[int, RankEnd] | None:
    """The rank that failed first in that attempt; at the same time, one that failed on its own
    rather than one a launcher stopped."""
    failed = [
        (rank, end)
        for rank, rank_runs in runs.items()
        if (end := rank_runs.end_of(attempt)) is not None and end.code != 0
    ]
    if not failed:
        return None
    return min(failed, key=lambda item: (item[1].ended, item[1].code in STOPPED_CODES, item[0]))


def read_attempts(job_dir: str) -> int:
    """How often the job's ranks were started, from rank 0's record alone: every restart starts
    every rank again. Cheap enough for every status refresh of a running job."""
    try:
        with open(os.path.join(job_dir, rank_runs_name(0)), encoding="utf-8") as record:
            return len(parse_rank_runs(record.read(_MAX_READ)).starts)
    except OSError:
        return 0


def restart_event(runs: dict[int, RankRuns], restart: int) -> str:
    """The job's event for restart n (1 = the first): what ended the attempt before it."""
    first = first_failure(runs, restart - 1)
    if first is None:
        return f"restart {restart} of the ranks"
    return (
        f"restart {restart} of the ranks: rank {first[0]} failed first (exit code {first[1].code})"
    )


def apply_runs(ranks: list[RankInfo], runs: dict[int, RankRuns], state: JobState) -> list[RankInfo]:
    """The ranks with their restarts and faults (the rank that failed first in each attempt);
    once the job has ended, each rank's own exit code, end and state from its last run."""
    last = attempts(runs) - 1
    blamed = {attempt: first_failure(runs, attempt) for attempt in range(last + 1)}
    for info in ranks:
        rank_runs = runs.get(info.rank)
        if rank_runs is None:
            continue
        info.restarts = rank_runs.restarts
        for attempt, first in blamed.items():
            if first is None or first[0] != info.rank:
                continue
            if attempt < last:  # the fault that caused restart attempt + 1
                info.faults.append(RankFault(restart=attempt + 1, node=info.node))
            elif state == JobState.FAILED:  # the fault the job failed on
                info.faults.append(RankFault(restart=None, node=info.node))
        end = rank_runs.end_of(last) if state.finished else None
        if end is not None:
            info.exit_code, info.ended = end.code, end.ended
            if end.code == 0:
                info.state = JobState.SUCCEEDED.value
            elif state != JobState.CANCELLED:
                info.state = JobState.FAILED.value
    return ranks


def failure_reason(reason: str | None, state: JobState, runs: dict[int, RankRuns]) -> str | None:
    """The job's reason, with the rank that failed first in its last attempt once it failed."""
    first = first_failure(runs, attempts(runs) - 1) if state == JobState.FAILED else None
    if first is None:
        return reason
    named = f"rank {first[0]} failed first (exit code {first[1].code})"
    return f"{reason}: {named}" if reason else named
