"""Training progress for a log viewed in a terminal: a tqdm bar plus a plain line every N steps.

The bar redraws with carriage returns (a terminal-grade log view shows one live line); the plain
lines (step, loss, learning rate, tokens/s, ETA) stay in the log for later reading and grep.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def format_eta(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class Progress:
    def __init__(self, total: int, initial: int, *, enabled: bool, every: int = 1) -> None:
        self.total = total
        self.initial = initial
        self.every = max(1, every)
        self.enabled = enabled
        self.started = time.perf_counter()
        self.done = 0
        self.bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            stream = sys.stdout
            self.bar = tqdm(
                total=total,
                initial=initial,
                unit="step",
                desc="train",
                file=stream,
                ncols=110,
                mininterval=0.5 if stream.isatty() else 5.0,
                ascii=None,
                leave=True,
            )

    def eta(self, step: int) -> float:
        if self.done == 0:
            return float("nan")
        per_step = (time.perf_counter() - self.started) / self.done
        return per_step * (self.total - step)

    def update(self, step: int, *, loss: float, lr: float, tokens_per_second: float) -> str:
        """Record the end of optimizer step `step` (1-based); returns the plain log line."""
        self.done += 1
        eta = self.eta(step)
        line = (
            f"step {step}/{self.total} | loss {loss:.4f} | lr {lr:.2e} | "
            f"{tokens_per_second:,.0f} tok/s | eta {format_eta(eta) if eta == eta else '?'}"
        )
        if not self.enabled:
            return line
        self.bar.set_postfix_str(f"loss={loss:.4f} tok/s={tokens_per_second:,.0f}", refresh=False)
        self.bar.update(1)
        if step % self.every == 0 or step == self.total:
            self.bar.write(line, file=sys.stdout)
        return line

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
