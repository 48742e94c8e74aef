"""Untrusted input at the REST boundary: JSON bodies and whole numbers in query strings.

What no later layer can take is refused here with a 400 naming the field: JSON nested deeper than
any request needs (the parser would recurse until it crashes), strings with unpaired UTF-16
surrogates (valid JSON escapes such as "\\ud800", but no file system, process environment or
database can store them) and numbers beyond what JSON clients and SQLite can represent.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import InvalidRequest

MAX_DEPTH = 32
"""Nesting levels a request body may have (the deepest real one, a spec with env, has 3)."""
MAX_QUERY_INT = 2**53 - 1
"""The largest whole number a JavaScript client can send exactly (and SQLite can store)."""


def parse_json_body(raw: bytes | None) -> Any:
    """The JSON value of a request body (empty: null), checked by `check_json`."""
    try:
        value = json.loads(raw or b"null")
    except RecursionError:
        raise InvalidRequest(f"the body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:  # UnicodeDecodeError included
        raise InvalidRequest(f"the body is not valid JSON: {error}") from None
    check_json(value)
    return value


def check_json(value: Any) -> None:
    """Refuse too-deep nesting and unencodable strings (keys included), naming the field as
    pydantic does (`env.NAME`, `command.1`). Iterative: no depth can make it recurse."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise InvalidRequest(
                f"the body nests deeper than {MAX_DEPTH} levels", field=".".join(path[:3]) or None
            )
        if isinstance(item, str):
            _check_string(item, path)
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_string(key, (*path, "<key>"))
                stack.append((child, (*path, key)))
        elif isinstance(item, list):
            stack.extend((child, (*path, str(index))) for index, child in enumerate(item))


def _check_string(text: str, path: tuple[str, ...]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        field = ".".join(part for part in path if part != "<key>") or None
        what = "a key" if path and path[-1] == "<key>" else "the value"
        raise InvalidRequest(
            f"{field or 'the body'}: {what} has an unpaired UTF-16 surrogate "
            f"(\\u{ord(text[error.start]):04x} at character {error.start}): send valid Unicode",
            field=field,
        ) from None


def query_int(name: str, raw: str | None, default: int) -> int:
    """A whole-number query argument: absent or empty -> default; otherwise a 400 naming it
    unless it is a plain decimal within +-MAX_QUERY_INT."""
    if raw is None or raw == "":
        return default
    text = raw.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isascii() or not digits.isdigit() or len(digits) > 20:
        raise InvalidRequest(f"{name} must be a whole number, not '{raw[:40]}'", field=name)
    value = int(text)
    if abs(value) > MAX_QUERY_INT:
        raise InvalidRequest(
            f"{name} must be between -{MAX_QUERY_INT} and {MAX_QUERY_INT}", field=name
        )
    return value
