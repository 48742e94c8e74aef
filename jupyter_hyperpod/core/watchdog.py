"""Hangs and stragglers of running jobs, from their ranks' step clocks (`core/stepclock.py`).

Hang: no new step on any rank for `max(hang_factor x median step time, hang_floor_seconds)`, or
no first step `start_cutoff_seconds` after the job started. The job stays RUNNING: its
`watchdog.stalled_since` is the last step seen on any rank (or its start), and the ranks that
stopped first (the lowest last step, then the earliest) are named with their nodes.

After the last step (every rank printed `step M/M`) the bound is the start cut-off: a program
that ends, or saves its checkpoint, takes a while without a step.

Straggler: at the end of each `window_seconds` window every rank's step rate is compared with the
median of the others'; a rank below `straggler_fraction` of it for `straggler_windows` windows in a
row is named. Ranks that meet in a collective every step step at one rate, the slowest one's: a
slow rank there makes the whole job slow, which is no straggler by this rule (and no hang).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .models import JobWatchdog, OperatorVerdict, RankClock, Straggler, WatchdogSpec

if TYPE_CHECKING:
    from .settings import HyperPodSettings
    from .stepclock import JobClocks, RankClockState


@dataclass(frozen=True)
class WatchdogConfig:
    """A job's watchdog settings: its spec's, else the admin's."""

    enabled: bool
    step_pattern: str | None
    hang_factor: float
    hang_floor_seconds: float
    start_cutoff_seconds: float
    straggler_fraction: float
    straggler_windows: int
    window_seconds: float
    auto_cancel_minutes: float | None


def config_for(spec: WatchdogSpec | None, settings: HyperPodSettings) -> WatchdogConfig:
    given = spec or WatchdogSpec()

    def pick(name: str) -> float:
        value = getattr(given, name)
        return float(value if value is not None else getattr(settings, f"watchdog_{name}"))

    return WatchdogConfig(
        enabled=given.enabled,
        step_pattern=given.step_pattern,
        hang_factor=pick("hang_factor"),
        hang_floor_seconds=pick("hang_floor_seconds"),
        start_cutoff_seconds=pick("start_cutoff_seconds"),
        straggler_fraction=pick("straggler_fraction"),
        straggler_windows=int(pick("straggler_windows")),
        window_seconds=pick("window_seconds"),
        auto_cancel_minutes=given.auto_cancel_minutes,
    )


def _clock(rank: int, state: RankClockState, nodes: dict[int, str | None]) -> RankClock:
    return RankClock(
        rank=rank,
        node=nodes.get(rank),
        step=state.step,
        last_step_at=state.last_step_at,
        step_seconds=state.step_seconds,
        rate=state.rate,
    )


def hang_bound(clocks: JobClocks, config: WatchdogConfig) -> float:
    """Seconds without a step that count as a hang: max(k x median step time, floor); once
    every rank printed its last step (`step M/M`), the start cut-off (the end of a run, saving
    a checkpoint, may take as long as its start)."""
    if clocks.ranks and all(c.done for c in clocks.ranks.values()):
        return max(config.start_cutoff_seconds, config.hang_floor_seconds)
    medians = [s for c in clocks.ranks.values() if (s := c.step_seconds) is not None]
    if not medians:
        return config.hang_floor_seconds
    return max(config.hang_factor * statistics.median(medians), config.hang_floor_seconds)


def assess(
    clocks: JobClocks,
    config: WatchdogConfig,
    *,
    started: float | None,
    now: float,
    nodes: dict[int, str | None],
) -> JobWatchdog:
    """The job's watchdog verdict now; remembers in `clocks` since when it is stalled."""
    clocks.close_window(now, config.window_seconds, config.straggler_fraction)
    ranks = sorted(clocks.ranks.items())
    views = [_clock(rank, state, nodes) for rank, state in ranks]
    bound = hang_bound(clocks, config)
    seen = [state.last_step_at for _, state in ranks if state.last_step_at is not None]
    since: float | None = None
    detail: str | None = None
    stopped: list[RankClock] = []
    if not seen:
        cutoff = config.start_cutoff_seconds
        if cutoff > 0 and started is not None and now - started > cutoff:
            since = started
            detail = f"no step printed within {config.start_cutoff_seconds:g} s of the start"
            stopped = views
    else:
        last = max(seen)
        if now - last > bound:
            since = last
            lowest = min((state.step or 0) for _, state in ranks)
            behind = [
                (state.last_step_at or 0.0, view)
                for (_, state), view in zip(ranks, views, strict=True)
                if (state.step or 0) == lowest
            ]
            stopped = [view for _, view in sorted(behind, key=lambda item: item[0])]
            detail = (
                f"no new step on any rank for {now - last:.0f} s (bound {bound:.1f} s: "
                f"max({config.hang_factor:g} x median step time, {config.hang_floor_seconds:g} s))"
            )
    if since is None:
        clocks.stalled_since = clocks.detected_at = None
    elif clocks.stalled_since != since:
        clocks.stalled_since, clocks.detected_at = since, now
    stragglers = [
        Straggler(
            rank=rank,
            node=nodes.get(rank),
            rate=state.rate or 0.0,
            others_rate=statistics.median(
                [c.rate or 0.0 for r, c in clocks.ranks.items() if r != rank]
            ),
            windows=state.slow_windows,
        )
        for rank, state in ranks
        if state.slow_windows >= config.straggler_windows and since is None
    ]
    cancel_at = (
        clocks.detected_at + config.auto_cancel_minutes * 60
        if clocks.detected_at is not None and config.auto_cancel_minutes
        else None
    )
    return JobWatchdog(
        stalled_since=since,
        stalled_detail=detail,
        bound_seconds=bound,
        stopped_first=stopped,
        stragglers=stragglers,
        ranks=views,
        auto_cancel_at=cancel_at,
    )


def evidence(watchdog: JobWatchdog) -> str:
    """One line for the job's history: why it counts as stalled, and who stopped first."""
    ranks = ", ".join(
        f"rank {c.rank}" + (f" on {c.node}" if c.node else "") + f" at step {c.step}"
        for c in watchdog.stopped_first
    )
    return f"{watchdog.stalled_detail}; stopped first: {ranks or 'none'}"


def _where(clock: RankClock | Straggler) -> str:
    return f"rank {clock.rank}" + (f" on {clock.node}" if clock.node else "")


def summary(watchdog: JobWatchdog | None, when: Callable[[float], str]) -> str:
    """The watchdog's words for a job list (`jupyter hyperpod jobs`, `%hyperpod jobs`): stalled
    since when and who stopped first, or the stragglers; '' when all is well."""
    if watchdog is None:
        return ""
    if watchdog.stalled_since is not None:
        first = ", ".join(
            _where(c) + (f" at step {c.step}" if c.step is not None else "")
            for c in watchdog.stopped_first
        )
        return f"stalled since {when(watchdog.stalled_since)}" + (
            f" (stopped first: {first})" if first else ""
        )
    return "; ".join(
        f"straggler: {_where(s)}, {s.rate:.2g} steps/s vs {s.others_rate:.2g}"
        for s in watchdog.stragglers
    )


def operator_summary(verdict: OperatorVerdict | None, when: Callable[[float], str]) -> str:
    """The cluster operator's own verdict in a job list's words (beside `summary`'s):
    'HyperPod: HANGING (rule r) at 10:02, restarting the job (restart 1)'; '' when none."""
    if verdict is None:
        return ""
    at = f" at {when(verdict.at)}" if verdict.at is not None else ""
    where = ", ".join(
        [f"rank {rank}" for rank in verdict.ranks] + [f"on {node}" for node in verdict.nodes]
    )
    return f"HyperPod: {verdict.state} (rule {verdict.rule}){at}, {verdict.action}" + (
        f" [{where}]" if where else ""
    )
