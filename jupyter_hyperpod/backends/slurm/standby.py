"""One `sbatch` started ahead of the next submit, waiting for its script on standard input.

sbatch spends about a quarter of a submit before it reads its script: exec, libslurm, slurm.conf,
the SPANK plugins of plugstack.conf (pyxis on many HyperPod clusters). Started ahead, the submit
pays only for what comes after: the select plugins, munge, the RPC to slurmctld. On the test
cluster `sbatch --parsable` took a median 4.3 ms started cold against 3.2 ms started ahead (30
interleaved rounds; `bench/slurm/bench_slurm.py` prints the submit both ways).

Safe by construction:
- sbatch reads its whole script before it loads anything that talks to slurmctld, and submits
  only once its input ends: a standby that is never used, or whose server dies, reads an empty
  script and exits ("Batch script is empty!") without submitting anything.
- It is used only for the same command line, the same environment (sbatch copies it into the
  job) and the same slurm.conf (path, size and modification time) as the submit that takes it;
  otherwise it is stopped and the submit starts its own.
- It waits at most `max_age` seconds: then the watch stops it, and the next submit starts cold.
  That also bounds how long a change to a file slurm.conf includes (plugstack.conf's SPANK
  plugins, which sbatch loads before it reads its script) goes unseen by a standby.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .watch import CommandWatch, Watched, stop_and_reap

log = logging.getLogger(__name__)

Starter = Callable[[list[str], dict[str, str]], "subprocess.Popen[str]"]
"""Starts a command (argv, environment) with its standard input a pipe."""


@dataclass(frozen=True)
class _Key:
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    conf: tuple[str, int, int] | None


@dataclass
class _Waiting:
    key: _Key
    process: subprocess.Popen[str]
    watched: Watched


class Standby:
    """Keeps at most one started command waiting for its input; `take` hands it to a run of the
    same command, `refill` starts the next one on a thread of its own (not in the submit's
    time)."""

    def __init__(
        self,
        *,
        start: Starter,
        watch: CommandWatch,
        max_age: float,
        conf_path: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._start = start
        self._watch = watch
        self.max_age = max_age
        self._conf_path = conf_path
        self._lock = threading.Lock()
        self._waiting: _Waiting | None = None
        self._filling = False
        self._closed = False
        self.taken = 0
        """How many runs got a started command (tests and benches read it)."""

    @property
    def enabled(self) -> bool:
        return self.max_age > 0 and not self._closed

    @property
    def waiting_pid(self) -> int | None:
        """The pid of the command waiting for its input, if one does."""
        waiting = self._waiting
        return waiting.process.pid if waiting is not None else None

    def take(self, argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[str] | None:
        """The waiting command when it was started as `argv` with `env` and the same slurm.conf,
        and still waits; else None (and a waiting one that does not fit is stopped)."""
        with self._lock:
            waiting, self._waiting = self._waiting, None
        if waiting is None:
            return None
        waiting.watched.finish()  # from here on the watch never stops it: it is ours
        fits = waiting.key == self._key(argv, env) and waiting.watched.stopped_because is None
        if fits and waiting.process.poll() is None:
            self.taken += 1
            return waiting.process
        _stop(waiting.process)
        return None

    def refill(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        """Start the next waiting command in the background, unless one waits or is starting."""
        if not self.enabled:
            return
        with self._lock:
            if self._waiting is not None or self._filling:
                return
            self._filling = True
        key = self._key(argv, env)
        threading.Thread(
            target=self._fill, args=(key,), name="hyperpod-slurm-standby", daemon=True
        ).start()

    def close(self) -> None:
        """Stop the waiting command (it submits nothing) and start no other."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, None
        if waiting is not None:
            waiting.watched.finish()
            _stop(waiting.process)

    def _fill(self, key: _Key) -> None:
        try:
            process = self._start(list(key.argv), dict(key.env))
        except Exception as error:  # the submit that comes will start its own and say why
            log.debug("no standby %s: %s", key.argv[0], error)
            with self._lock:
                self._filling = False
            return
        watched = self._watch.watch(
            process,
            limit=self.max_age,
            limit_message="waited for a script longer than its max_age",
            reap=True,
        )
        with self._lock:
            self._filling = False
            kept = not self._closed and self._waiting is None
            if kept:
                self._waiting = _Waiting(key, process, watched)
        if not kept:  # closed while it started
            watched.finish()
            _stop(process)

    def _key(self, argv: Sequence[str], env: Mapping[str, str]) -> _Key:
        return _Key(tuple(argv), tuple(sorted(env.items())), self._conf_stamp())

    def _conf_stamp(self) -> tuple[str, int, int] | None:
        """slurm.conf as the clients would read it now: a changed file means a new standby."""
        path = self._conf_path()
        if not path:
            return None
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return (path, stat.st_size, stat.st_mtime_ns)


def _stop(process: subprocess.Popen[Any]) -> None:
    """Kill and reap a command that waits for its input (it has submitted nothing), and close
    its pipes (also when it ended by itself, or the watch stopped it)."""
    if process.returncode is None:
        process.kill()
    stop_and_reap(process)
