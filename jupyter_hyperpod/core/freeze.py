"""The packages of a job's interpreter (`python -m pip freeze`) as its snapshot records them,
run once per interpreter and state of its site-packages (`core/snapshot.py`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


class FreezeCache:
    """`python -m pip freeze` of an interpreter, kept while its environment stays the same (a
    submit then costs a few stats, not a pip run): the interpreter and the mtimes of its
    site-packages directories, which an install, upgrade or removal changes."""

    def __init__(self, run: Callable[[Sequence[str]], str] | None = None) -> None:
        self._run = run or run_freeze
        self._cache: dict[tuple[Any, ...], str | None] = {}

    def freeze(self, python: str) -> str | None:
        found = shutil.which(python)
        if not found:
            return None  # not on this machine (a cluster-only path): nothing to record
        # Run as named, never its realpath: a venv's bin/python links to the base interpreter,
        # which would list the base environment's packages, not the job's.
        found = os.path.abspath(found)
        key = environment_key(found)
        if key not in self._cache:
            try:
                self._cache[key] = self._run([found, "-m", "pip", "freeze"])
            except (OSError, subprocess.SubprocessError):
                self._cache[key] = None
        return self._cache[key]


def environment_key(python: str) -> tuple[Any, ...]:
    real = os.path.realpath(python)
    stamps: list[tuple[str, int]] = [(real, os.stat(real).st_mtime_ns)]
    for site in _site_directories(python, real):
        try:
            stamps.append((site, os.stat(site).st_mtime_ns))
        except OSError:
            _SITES.pop((python, real), None)  # the environment was removed or remade
            stamps.append((site, -1))
    return (python, *stamps)


_SITES: dict[tuple[str, str], list[str]] = {}
"""An interpreter's site-packages directories, found once (a glob of its prefixes took a
millisecond of every submit); stat'ed on every key."""


def _site_directories(python: str, real: str) -> list[str]:
    found = _SITES.get((python, real))
    if found is None:
        found = [
            str(site)
            for prefix in dict.fromkeys([Path(python).parent.parent, Path(real).parent.parent])
            for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages")
            for site in sorted(prefix.glob(pattern))
        ]
        _SITES[(python, real)] = found
    return found


def run_freeze(argv: Sequence[str]) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=True).stdout


PROCESS_FREEZE = FreezeCache()
"""The process's cache (its key follows installs, so every service of the process shares it)."""
