"""What the benches share: a free port, timing, and one way to summarise latencies.

A bench script imports it after putting `bench/` on its path:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from common import columns, free_port, percentile, summary, timed, timed_pair
"""

from __future__ import annotations

import socket
import statistics
import time
from collections.abc import Callable, Sequence


def free_port() -> int:
    """A TCP port of 127.0.0.1 nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of `values`, nearest rank (no interpolation)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def summary(values: Sequence[float], quantiles: Sequence[float] = (0.99,)) -> str:
    """`n`, p50, the given quantiles and the maximum of latencies in ms, in fixed columns."""
    columns = [f"n={len(values):5d}", f"p50={median(values):8.2f} ms"]
    columns += [f"p{round(q * 100):02d}={percentile(values, q):8.2f} ms" for q in quantiles]
    columns.append(f"max={max(values):8.2f} ms")
    return "  ".join(columns)


def columns(values: Sequence[float], quantiles: Sequence[float] = (0.9,), width: int = 7) -> str:
    """The median and the given quantiles as fixed-width numbers (a table with its own header)."""
    numbers = [median(values), *(percentile(values, q) for q in quantiles)]
    return " ".join(f"{number:{width}.1f}" for number in numbers)


def timed(function: Callable[[], object], repeat: int = 1) -> float:
    """The best of `repeat` runs of `function`, in seconds (the least disturbed by the machine)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def timed_pair(
    rounds: int, ours: Callable[[], object], raw: Callable[[], object], *, settle: float = 0.0
) -> tuple[list[float], list[float]]:
    """Both actions in turns (one warm-up each), so that load on the machine hits both alike;
    each run's time in ms. `settle`: seconds of pause before each, so that what one leaves
    running in the background (a job starting, a process started ahead) is not timed as the
    other's."""
    ours()
    raw()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for action, into in ((ours, times[0]), (raw, times[1])):
            if settle:
                time.sleep(settle)
            start = time.perf_counter()
            action()
            into.append((time.perf_counter() - start) * 1000)
    return times
