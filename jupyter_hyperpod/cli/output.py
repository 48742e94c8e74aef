"""How the verbs talk to a person: the console they write to while they work, the outcome they
return (a value that shows as a table, and an exit code) and JSON for --json."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..render import Table, to_jsonable
from .exits import EXIT_OK


@dataclass
class Console:
    """Where the verbs write while they work (logs, progress); results are returned."""

    out: Callable[[], TextIO] = field(default=lambda: sys.stdout)
    err: Callable[[], TextIO] = field(default=lambda: sys.stderr)
    notes_to_err: bool = True
    prog: str = "jupyter hyperpod"
    """How the user types a verb here (`%hyperpod` in a notebook), for the commands notes suggest."""

    def write(self, text: str) -> None:
        stream = self.out()
        stream.write(text)
        stream.flush()

    def note(self, text: str) -> None:
        stream = self.err() if self.notes_to_err else self.out()
        stream.write(text + "\n")
        stream.flush()


@dataclass
class Outcome:
    """A verb's result: the value (returned by the magic, printed by the CLI) and the exit code."""

    value: Any = None
    exit_code: int = EXIT_OK
    print_value: bool = True
    """False when the verb already printed what a person needs (submit, follow)."""


class RankPrefixer:
    """Whole lines with a `[rank] ` prefix, for logs of several ranks at once."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.partial: dict[int, str] = {}

    def feed(self, rank: int, text: str) -> str:
        if not self.enabled:
            return text
        text = self.partial.pop(rank, "") + text
        lines = text.split("\n")
        if lines[-1]:
            self.partial[rank] = lines[-1]
        return "".join(f"[{rank}] {line}\n" for line in lines[:-1])

    def flush(self) -> str:
        rest = "".join(f"[{rank}] {line}\n" for rank, line in sorted(self.partial.items()))
        self.partial.clear()
        return rest


class TableResult:
    """A table for people; `.result` (and --json) is the data for scripts."""

    def __init__(self, table: Table, result: Any) -> None:
        self._table = table
        self.result = result

    def __str__(self) -> str:
        return str(self._table)

    def _repr_html_(self) -> str:
        return self._table.html()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self._table))

    def to_json(self) -> Any:
        return to_jsonable(self.result)


def as_json(value: Any) -> str:
    return json.dumps(to_jsonable(value), indent=2, default=str)
