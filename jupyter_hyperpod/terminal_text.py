"""Program output as a terminal shows it, for a notebook: colours as HTML, progress bars settled.

A rank's log holds what the program wrote to a terminal-like stream: ANSI colour codes (torchrun's
and our loop's rank banners, rich, colorama) and carriage returns (tqdm redrawing one line). A
notebook renders `text/html` before `text/plain`, so an escaped `<pre>` of that text showed the
raw codes ("[1;32mrank 0/2[0m") and every redraw of a bar. Colours go through nbconvert's
`ansi2html` (a dependency of jupyter_server; its `ansi-*` classes are the ones JupyterLab styles).
"""

from __future__ import annotations

import re
from typing import Any

from nbconvert.filters.ansi import ansi2html, strip_ansi

_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-HJKSTfhl]")
"""Cursor moves and erases (tqdm's `ESC[A`, `ESC[K`): nothing to show once settled."""


def settle_carriage_returns(text: str) -> str:
    """Each line as it was left on screen: the text after its last carriage return."""
    lines = []
    for line in text.split("\n"):
        if "\r" in line:
            drawn = [part for part in line.split("\r") if part]
            line = drawn[-1] if drawn else ""
        lines.append(line)
    return "\n".join(lines)


def terminal_html(text: str) -> str:
    settled = _CONTROL.sub("", settle_carriage_returns(text))
    return f"<pre>{ansi2html(settled)}</pre>"


def terminal_plain(text: str) -> str:
    return strip_ansi(_CONTROL.sub("", settle_carriage_returns(text)))


class TerminalText(str):
    """Output that shows as a terminal would: coloured in a notebook, settled as plain text."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(terminal_plain(str(self)).rstrip("\n"))

    def _repr_html_(self) -> str:
        return terminal_html(str(self))
