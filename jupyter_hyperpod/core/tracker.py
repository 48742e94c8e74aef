"""Job status in the background: readers answer from the store, never from the backend.

One `Tracker` per service (so per backend) runs one refresh at a time (single flight) in its own
thread: the batched status query of every unfinished job, then the store updated. Its interval
follows the age of the youngest unfinished job, as submitit's watcher does (submitit
`core.InfoWatcher.update_if_long_enough`: `min(delay_s, max(2, last_job_delta / 2))`, i.e.
checks at 0, 2, 4, 8, 16... seconds after a submission, then every `delay_s`): a job just
submitted is looked at often, a week-old one rarely. A reader that watches an unfinished job
`nudge`s it, which brings the next refresh forward to `fresh_for` seconds after the last one.
While `watched()` says someone follows the changes as they happen (the job feed's subscribers,
`core/feed.py`), it refreshes every `min_interval` whatever the jobs' age. A listener's own read
after a refresh (the feed reading the jobs it publishes) is not someone watching: it nudges
nothing, or the tracker would refresh every `fresh_for` while a panel listens.

A refresh that fails (the cluster unreachable, a timeout) leaves the stored states as they were
and marks them stale with the reason: `GET jobs` still answers, saying since when and why the
states may be old, and the tracker retries with backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .errors import HyperPodError

log = logging.getLogger(__name__)

MAX_INTERVAL = 30.0
"""The longest wait between two refreshes while unfinished jobs exist (submitit's delay_s is 60)."""
FRESH_FOR = 0.5
"""A nudged refresh runs once the last one is this old (someone is watching)."""


@dataclass(frozen=True)
class Staleness:
    reason: str
    since: float
    """time.time() of the last refresh that worked (or of the first that failed, if none did)."""


class Tracker:
    """Runs `refresh` (returns the age in seconds of the youngest unfinished job, or None when
    there is none) in one background thread, and on demand in the caller's, one at a time."""

    def __init__(
        self,
        refresh: Callable[[], float | None],
        *,
        min_interval: float,
        max_interval: float = MAX_INTERVAL,
        fresh_for: float = FRESH_FOR,
        name: str = "hyperpod-tracker",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._refresh = refresh
        self.min_interval = max(0.01, float(min_interval))
        self.max_interval = max(self.min_interval, float(max_interval))
        self.fresh_for = fresh_for
        self.name = name
        self.clock = clock
        self._flight = threading.Lock()
        """Held while a refresh runs: there is never a second one at the same time."""
        self._wake = threading.Condition()
        self._nudged = False
        self._publish = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.last_attempt = 0.0
        self.last_success = 0.0
        self.last_success_time: float | None = None
        self.interval = self.min_interval
        self.refreshes = 0
        self.stale: Staleness | None = None
        self._first_done = threading.Event()
        self._listeners: list[Callable[[], None]] = []
        self._notifying: threading.Thread | None = None
        self.watched: Callable[[], bool] = lambda: False
        """True while someone follows the changes as they happen: refresh every min_interval."""

    # -- observers ----------------------------------------------------------------------------
    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """`listener()` runs in the refreshing thread after every refresh (worked or failed),
        so that what depends on the stored states (the job feed, `core/feed.py`) sees each
        change the tracker saw. Returns the function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _notify(self) -> None:
        self._notifying = threading.current_thread()
        try:
            for listener in list(self._listeners):
                try:
                    listener()
                except Exception:  # an observer's failure must never stop the tracker
                    log.exception("tracker listener %r failed", listener)
        finally:
            self._notifying = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # -- asking for freshness -----------------------------------------------------------------
    def nudge(self, *, now: bool = False) -> None:
        """Someone watches an unfinished job (or just submitted or cancelled one: `now`). A
        listener reading after a refresh (in `_notify`) is not someone: ignored."""
        if not now and self._notifying is threading.current_thread():
            return
        if not now and self._nudged:
            # Already asked for: waking the tracker again changes nothing, and each wake made
            # a GET of the jobs hand the GIL to it (14% of the server's samples under reads).
            return
        with self._wake:
            self._nudged = True
            if now:
                self.last_attempt = 0.0
            self._wake.notify_all()

    def publish(self) -> None:
        """The store changed without the cluster (a job submitted, cancelled, held): the
        listeners hear it now, in the tracker's thread, without asking the backend (a refresh
        run after every submit put a `squeue` beside the next submit's `sbatch`)."""
        with self._wake:
            self._publish = True
            self._wake.notify_all()

    @property
    def first_done(self) -> bool:
        """The first refresh after start has run (worked or failed)."""
        return self._first_done.is_set()

    def wait_first(self, timeout: float) -> bool:
        """Wait (at most timeout) for the first refresh after start: a process that has just
        started has not looked at its jobs yet. True when it has."""
        return self._first_done.wait(timeout)

    def refresh(self, max_age: float = 0.0) -> None:
        """Refresh in the caller's thread unless one finished less than max_age seconds ago;
        waits for a refresh already running instead of starting a second one."""
        if max_age > 0 and self.clock() - self.last_success < max_age:
            return
        started = self.clock()
        with self._flight:
            if self.last_success >= started and max_age > 0:
                return  # the one we waited for is fresh enough
            self._run_once()

    # -- the loop -----------------------------------------------------------------------------
    def _due(self) -> float:
        """Seconds until the next refresh should start (<= 0: now)."""
        since = self.clock() - self.last_attempt
        interval = self.min_interval if self.watched() else self.interval
        if self._nudged:
            return min(self.fresh_for, interval) - since
        return interval - since

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopped and not self._publish and (wait := self._due()) > 0:
                    self._wake.wait(wait)
                if self._stopped:
                    return
                due = self._due() <= 0
                if due:
                    self._nudged = False
                self._publish = False
            with self._flight:
                if self._stopped:
                    return
                if due:
                    self._run_once()  # the listeners hear it after the refresh
                else:
                    self._notify()

    def _run_once(self) -> None:
        self.last_attempt = self.clock()
        try:
            youngest = self._refresh()
        except Exception as error:  # a backend failure must never stop the tracker
            reason = error.message if isinstance(error, HyperPodError) else repr(error)
            if not isinstance(error, HyperPodError):
                log.exception("job status refresh failed")
            else:
                log.info("job status refresh failed: %s", reason)
            since = self.stale.since if self.stale else (self.last_success_time or time.time())
            self.stale = Staleness(reason=reason, since=since)
            self.interval = min(self.max_interval, max(self.min_interval, self.interval * 2))
        else:
            self.stale = None
            self.last_success = self.clock()
            self.last_success_time = time.time()
            self.refreshes += 1
            self.interval = self._interval_for(youngest)
        finally:
            self._first_done.set()
        self._notify()

    def _interval_for(self, youngest: float | None) -> float:
        if youngest is None:
            return self.max_interval
        return min(self.max_interval, max(self.min_interval, youngest / 2))
