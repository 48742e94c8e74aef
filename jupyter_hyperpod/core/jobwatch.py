"""The watchdog of a service's running jobs, run by its tracker after each status refresh.

For each running job it reads what every rank's log gained (`core/stepclock.py`: one reader per
rank, kept open while the job runs, read from where it stopped), then judges hangs and
stragglers (`core/watchdog.py`). Readers of `GET jobs` take the last verdict (`of`): they never
read a log. A job stalled longer than its `auto_cancel_minutes` is cancelled through `cancel`,
with the evidence.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .backend import LogReader
from .models import Job, JobWatchdog
from .settings import HyperPodSettings
from .stepclock import StepClocks
from .watchdog import assess, config_for, evidence

log = logging.getLogger(__name__)

OpenReader = Callable[[Job, dict[str, Any], int], LogReader]
Cancel = Callable[[str, str], None]
"""Cancel job id, recording the evidence (one line) in its history."""


class JobWatch:
    def __init__(
        self,
        settings: HyperPodSettings,
        open_reader: OpenReader,
        cancel: Cancel,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.open_reader = open_reader
        self.cancel = cancel
        self.clock = clock
        self.clocks = StepClocks()
        self._readers: dict[tuple[str, int], LogReader] = {}
        self._verdicts: dict[str, JobWatchdog] = {}
        self._lock = threading.Lock()

    def of(self, job_id: str) -> JobWatchdog | None:
        """The last verdict on a running job (None: not watched, or not looked at yet)."""
        return self._verdicts.get(job_id)

    def refresh(self, rows: list[tuple[Job, dict[str, Any]]]) -> None:
        """One look at every running job (`rows`: the job and its backend data)."""
        with self._lock:
            watched = {
                job.id for job, _ in rows if config_for(job.spec.watchdog, self.settings).enabled
            }
            self._forget_except(watched)
            for job, data in rows:
                if job.id in watched:
                    try:
                        self._look(job, data)
                    except Exception as error:  # one job's log must not stop the others'
                        log.debug("watchdog: no look at %s: %s", job.id, error)

    def _look(self, job: Job, data: dict[str, Any]) -> None:
        config = config_for(job.spec.watchdog, self.settings)
        clocks = self.clocks.of(job.id, config.step_pattern)
        now = self.clock()
        for rank in range(job.spec.world_size):
            key = (job.id, rank)
            reader = self._readers.get(key)
            if reader is None:
                try:
                    reader = self._readers[key] = self.open_reader(job, data, rank)
                except Exception as error:  # no log yet (a pod not scheduled)
                    log.debug("watchdog: no log of %s rank %s: %s", job.id, rank, error)
                    continue
            clocks.read(rank, reader, now)
        nodes = {info.rank: info.node for info in job.ranks}
        verdict = assess(clocks, config, started=job.started, now=now, nodes=nodes)
        self._verdicts[job.id] = verdict
        if (
            verdict.auto_cancel_at is not None
            and now >= verdict.auto_cancel_at
            and not clocks.auto_cancelled
        ):
            clocks.auto_cancelled = True
            minutes = config.auto_cancel_minutes or 0
            self.cancel(
                job.id,
                f"cancelled by the watchdog after {minutes:g} min stalled: {evidence(verdict)}",
            )

    def _forget_except(self, running: set[str]) -> None:
        for key in [key for key in self._readers if key[0] not in running]:
            self._readers.pop(key).close()
        for job_id in set(self._verdicts) - running:
            self._verdicts.pop(job_id, None)
        self.clocks.keep_only(running)

    def close(self) -> None:
        with self._lock:
            self._forget_except(set())
