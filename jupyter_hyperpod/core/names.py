"""Why a job name is not valid, in words that name the offending characters.

The rule itself is `models.JOB_NAME_PATTERN` (RFC 1123 labels, at most 52 characters so that
the Services and pods the operators derive from it stay within 63); this only explains a miss.
These are the words: the panel's instant check (src/names.ts) says the same, and both are pinned
to the same cases (tests/name_cases.json, read by tests/test_names.py and names.spec.ts).
"""

from __future__ import annotations

import re

MAX_NAME = 52
_ALLOWED = re.compile(r"[a-z0-9-]")
_SPOKEN = {" ": "a space", "\t": "a tab", "\n": "a line break"}


def _spoken(char: str) -> str:
    return _SPOKEN.get(char, f"'{char}'")


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def name_problem(name: str) -> str | None:
    """What is wrong with `name` as a job name, or None when it is valid."""
    if not name:
        return "a job needs a name"
    if len(name) > MAX_NAME:
        return f"at most {MAX_NAME} characters ({len(name)} given)"
    upper: list[str] = []
    bad: list[str] = []
    for char in name:
        if "A" <= char <= "Z":
            seen = upper
        elif not _ALLOWED.fullmatch(char):
            seen = bad
        else:
            continue
        if char not in seen:
            seen.append(char)
    problems = []
    if upper:
        problems.append(f"{_listed([_spoken(c) for c in upper])} must be lowercase")
    if bad:
        verb = "is" if len(bad) == 1 else "are"
        problems.append(f"{_listed([_spoken(c) for c in bad])} {verb} not allowed")
    if problems:
        return "; ".join(problems) + " (a job name takes lowercase letters, digits and '-')"
    if name[0] == "-" or name[-1] == "-":
        return "start and end with a letter or digit, not '-'"
    return None
