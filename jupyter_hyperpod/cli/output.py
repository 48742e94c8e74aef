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


class LineGate:
    """A followed log and the notes about its job (a state change), each note on a line of its
    own: one that comes while a log line is half written waits for that line's end (a note
    between the halves of one line read as part of it, in a terminal and in a notebook)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.mid_line = False
        self.waiting: list[str] = []

    def write(self, text: str) -> None:
        if not text:
            return
        if self.waiting:
            end = text.find("\n")
            if end < 0:
                self.console.write(text)
                return
            self.console.write(text[: end + 1])
            self.mid_line = False
            self._notes()
            text = text[end + 1 :]
            if not text:
                return
        self.console.write(text)
        self.mid_line = not text.endswith("\n")

    def note(self, text: str) -> None:
        if self.mid_line:
            self.waiting.append(text)
        else:
            self.console.note(text)

    def close(self) -> None:
        """The log stops here: end its half line, then say what waited."""
        if self.mid_line:
            self.console.write("\n")
            self.mid_line = False
        self._notes()

    def _notes(self) -> None:
        waiting, self.waiting = self.waiting, []
        for text in waiting:
            self.console.note(text)


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
