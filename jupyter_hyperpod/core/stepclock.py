"""Per-rank step clocks: the last step each rank printed and when the tracker saw it.

Each refresh reads only what a rank's log gained since the last one (`LogReader.read` from the
offset it reached), so a refresh costs what the ranks printed, not the size of their logs: a log
met for the first time is read from its last `FIRST_READ_BYTES`. The step lines are the ones the
progress parser (`jupyter_hyperpod/progress.py`) understands, read for their step number only:

- `step 12/100 ...` (our training loop, `jupyter_hyperpod.training.progress`, and plain logs);
- tqdm bars, `| 12/100 [00:05<00:37, ...]` (also the Hugging Face Trainer's bar), redrawn with
  carriage returns: every redraw is a step;
- the Trainer's log dicts (`{'loss': ...}`), one step each (they carry no step number);
- the job's own `step_pattern` (`WatchdogSpec`): its group `step`, else its first group, is the
  step number; without a group every match is one step.

The time of a step is when the tracker first read it: as fine as the refresh interval.
"""

from __future__ import annotations

import re
import statistics
from collections import deque
from dataclasses import dataclass, field

from .backend import LogReader

FIRST_READ_BYTES = 64 * 1024
"""Of a log met for the first time (a server restarted under a running job), only its end."""
MAX_READ_BYTES = 1024 * 1024
"""At most this much of one rank per refresh (the rest waits for the next one)."""
MAX_PARTIAL = 4096
"""An unterminated line longer than this is dropped (no step line is that long)."""
SAMPLES = 64
"""Step-time samples kept per rank (their median is the rank's step time)."""

STEP_LINE = re.compile(
    rb"\bstep\s+(?P<ours>\d+)\s*/\s*(?P<total>\d+)"  # ours and plain `step N/M`
    rb"|\|\s*(?P<tqdm>\d+)/(?P<bar_total>\d+|\?)\s*\["  # tqdm's format_meter
    rb"|(?P<tick>\{['\"]loss['\"]:)"  # the Trainer's log dicts
)
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
_SPLIT = re.compile(rb"[\r\n]")


def user_pattern(pattern: str | None) -> tuple[re.Pattern[bytes], str | int | None] | None:
    """The job's step pattern compiled, with the group that is the step number (None: none)."""
    if not pattern:
        return None
    compiled = re.compile(pattern.encode())
    if "step" in compiled.groupindex:
        return compiled, "step"
    return compiled, 1 if compiled.groups else None


@dataclass
class RankClockState:
    """What one rank's clock remembers between refreshes."""

    offset: int = -1
    """Bytes of the log read so far (-1: never read)."""
    partial: bytes = b""
    step: int | None = None
    total: int | None = None
    """The number of steps the last step line announced (`step N/M`), when it did."""
    last_step_at: float | None = None
    samples: deque[float] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    window_step: int = 0
    rate: float | None = None
    slow_windows: int = 0

    @property
    def done(self) -> bool:
        """It printed its last step (`step M/M`)."""
        return self.step is not None and self.total is not None and self.step >= self.total

    @property
    def step_seconds(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    def feed(
        self, data: bytes, now: float, pattern: tuple[re.Pattern[bytes], str | int | None] | None
    ) -> None:
        """The bytes the log gained: the newest step they tell, timed `now`."""
        text = self.partial + data
        if pattern is None and b"\x1b" not in text and not _has_token(text):
            cut = max(text.rfind(b"\n"), text.rfind(b"\r"))
            tail = text[cut + 1 :]
            self.partial = tail if len(tail) <= MAX_PARTIAL else b""
            return
        segments = _SPLIT.split(text)
        tail = segments.pop()
        self.partial = tail if len(tail) <= MAX_PARTIAL else b""
        if self.partial:  # tqdm's latest redraw ends with no \r until the next one
            segments.append(self.partial)
        newest: int | None = None
        ticks = 0
        for segment in reversed(segments):  # the newest numbered step is enough
            if not segment:
                continue
            if b"\x1b" in segment:
                segment = _ANSI.sub(b"", segment)
            elif pattern is None and not _has_token(segment):
                continue
            found = _step_of(segment, pattern)
            if found is None:
                continue
            if found[0] >= 0:
                newest, self.total = found
                break
            ticks += 1
        if newest is None and ticks:  # steps without numbers (the Trainer's dicts)
            newest = (self.step or 0) + ticks
        if newest is not None:
            self.saw(newest, now)

    def saw(self, step: int, now: float) -> None:
        if self.step is not None and step < self.step:  # the program started again
            self.samples.clear()
            self.window_step = step
        elif self.step is not None and step > self.step and self.last_step_at is not None:
            self.samples.append((now - self.last_step_at) / (step - self.step))
        if self.step != step:
            self.step = step
            self.last_step_at = now


def _has_token(text: bytes) -> bool:
    """`step`, `|` or `loss` is in every line STEP_LINE matches: a line (or a whole read) with
    none of them and no terminal escape holds no step, found by a C search, not a regex a line."""
    return b"step" in text or b"|" in text or b"loss" in text


def _step_of(
    segment: bytes, pattern: tuple[re.Pattern[bytes], str | int | None] | None
) -> tuple[int, int | None] | None:
    """The step number a line tells (-1 for a step without a number) and the total it
    announces; None for no step."""
    if pattern is not None:
        found = pattern[0].search(segment)
        if found is not None:
            group = pattern[1]
            if group is None:
                return -1, None
            value = found.group(group)
            return (int(value) if value and value.isdigit() else -1), None
    match = STEP_LINE.search(segment)
    if match is None:
        return None
    number = match["ours"] or match["tqdm"]
    total = match["total"] or match["bar_total"]
    if not number:
        return -1, None
    return int(number), int(total) if total and total.isdigit() else None


@dataclass
class JobClocks:
    """Every rank's clock of one job, and its step-rate windows."""

    pattern: tuple[re.Pattern[bytes], str | int | None] | None
    ranks: dict[int, RankClockState] = field(default_factory=dict)
    window_start: float | None = None
    windows: int = 0
    """Windows closed so far."""
    stalled_since: float | None = None
    detected_at: float | None = None
    auto_cancelled: bool = False

    def read(self, rank: int, reader: LogReader, now: float) -> None:
        """Read what rank's log gained since the last refresh."""
        clock = self.ranks.setdefault(rank, RankClockState())
        size = reader.size()
        if clock.offset < 0:
            clock.offset = max(0, size - FIRST_READ_BYTES)
        if size < clock.offset:  # the log was replaced (a restart truncates it)
            clock.offset, clock.partial = 0, b""
        if size == clock.offset:
            return
        data = reader.read(clock.offset, min(size - clock.offset, MAX_READ_BYTES))
        clock.offset += len(data)
        clock.feed(data, now, self.pattern)

    def close_window(self, now: float, length: float, fraction: float) -> bool:
        """Close the step-rate window if it is `length` seconds old: each rank's rate, and how
        many windows in a row each has been below `fraction` of the others' median."""
        if self.window_start is None:
            self.window_start = now
            for clock in self.ranks.values():
                clock.window_step = clock.step or 0
            return False
        elapsed = now - self.window_start
        if elapsed < length:
            return False
        for clock in self.ranks.values():
            clock.rate = max(0, (clock.step or 0) - clock.window_step) / elapsed
            clock.window_step = clock.step or 0
        for rank, clock in self.ranks.items():
            others = [c.rate or 0.0 for r, c in self.ranks.items() if r != rank]
            median = statistics.median(others) if others else 0.0
            if median > 0 and (clock.rate or 0.0) < fraction * median:
                clock.slow_windows += 1
            else:
                clock.slow_windows = 0
        self.window_start = now
        self.windows += 1
        return True


class StepClocks:
    """The clocks of every running job, kept by the service's tracker refresh."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobClocks] = {}

    def of(self, job_id: str, pattern: str | None) -> JobClocks:
        found = self.jobs.get(job_id)
        if found is None:
            found = self.jobs[job_id] = JobClocks(pattern=user_pattern(pattern))
        return found

    def keep_only(self, running: set[str]) -> None:
        for job_id in set(self.jobs) - running:
            del self.jobs[job_id]

    def get(self, job_id: str) -> JobClocks | None:
        return self.jobs.get(job_id)
