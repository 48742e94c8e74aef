"""Hostile-input, fault and fuzzing tests: every figure they measure is printed at the end.

Tests record figures with `record(section, name, value)`; `pytest_terminal_summary` prints them
after the run (e.g. `paths checked: 10240, escapes: 0, 5xx: 0`), so CI logs show what was proven.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

FIGURES: dict[str, dict[str, Any]] = defaultdict(dict)


def record(section: str, name: str, value: Any) -> None:
    FIGURES[section][name] = value


def add(section: str, name: str, amount: int = 1) -> None:
    FIGURES[section][name] = FIGURES[section].get(name, 0) + amount


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("hostile input, faults and fuzzing: figures")
    for section, figures in FIGURES.items():
        shown = ", ".join(f"{name}: {value}" for name, value in figures.items())
        terminalreporter.write_line(f"{section}: {shown}")
