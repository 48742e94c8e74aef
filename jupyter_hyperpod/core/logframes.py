"""The log-follow protocol's wire format: its frames and its close codes.

A followed log is a stream of `LogEvent` frames (`status`, `data`, `heartbeat`, `end`, `error`),
JSON text on the WebSocket (`LogEvent.to_json`), then a close code from `CLOSE_CODES` that says
whether a client should reconnect. A client that asks for `frames=binary` gets each data frame
as a binary WebSocket message instead (`LogEvent.to_binary`): a 13-byte header (`BINARY_HEADER`:
kind 1, rank, offset after the chunk; big-endian) and the log's bytes as they were read, so that
neither side escapes or parses a megabyte of JSON. Every other frame stays JSON text, and a
client that does not ask gets only text frames. The follow loop that produces the frames is
`core/logprotocol.py`; `table()` is the close-code table and the binary layout as data
(docs/log-protocol.json).
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import asdict, dataclass
from dataclasses import field as dataclass_field
from typing import Any, Literal

from .errors import HyperPodError
from .models import JobState

# -- close codes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CloseCode:
    """One WebSocket close code: what it means and whether a client should reconnect.

    retry: `never` (the answer will not change), `backoff` (reconnect with growing delays, for
    as long as the user follows) or `limited` (reconnect with backoff at most `max_retries`
    times in a row without new data, then give up: a server bug does not heal by itself)."""

    code: int
    name: str
    retry: Literal["never", "backoff", "limited"]
    message: str
    error: str | None = None
    """The `HyperPodError.code` a client raises for it (None: not an error)."""
    max_retries: int | None = None


CLOSE_CODES: tuple[CloseCode, ...] = (
    CloseCode(1000, "job_ended", "never", "The log is complete."),
    CloseCode(1001, "going_away", "backoff", "The server is shutting down or restarting."),
    CloseCode(
        1011,
        "server_error",
        "limited",
        "The server failed while following the log.",
        error="backend_error",
        max_retries=5,
    ),
    CloseCode(
        4000, "bad_request", "never", "The server refused the log request.", "invalid_request"
    ),
    CloseCode(4003, "forbidden", "never", "You may not read this log.", "forbidden"),
    CloseCode(4004, "not_found", "never", "This job no longer exists.", "not_found"),
    CloseCode(
        4009,
        "not_connected",
        "never",
        "The job belongs to another cluster than the one the server is connected to.",
        "not_connected",
    ),
    CloseCode(
        4503,
        "unavailable",
        "backoff",
        "The cluster cannot be reached right now.",
        "backend_unavailable",
    ),
)
CLOSE = {close.name: close for close in CLOSE_CODES}
BY_CODE = {close.code: close for close in CLOSE_CODES}
CLOSE_JOB_ENDED = CLOSE["job_ended"].code


def close_for(error: BaseException) -> CloseCode:
    """The close code that ends a stream because of `error`."""
    if isinstance(error, HyperPodError):
        if error.status == 400:
            return CLOSE["bad_request"]
        if error.status in (401, 403):
            return CLOSE["forbidden"]
        if error.status == 404:
            return CLOSE["not_found"]
        if error.code == "not_connected":
            return CLOSE["not_connected"]
        if error.status == 503:
            return CLOSE["unavailable"]
    return CLOSE["server_error"]


def table() -> dict[str, Any]:
    """The close codes, frame types and the binary data frame's layout as data
    (docs/log-protocol.json)."""
    return {
        "frames": list(FRAME_TYPES),
        "encodings": list(FRAME_ENCODINGS),
        "binary_data": {
            "query": f"{FRAMES_QUERY}=binary",
            "byte_order": "big",
            "header_bytes": BINARY_HEADER.size,
            "fields": [
                {"name": "kind", "type": "uint8", "value": BINARY_DATA},
                {"name": "rank", "type": "uint32"},
                {"name": "offset", "type": "uint64"},
            ],
            "payload": "the rank's log bytes, UTF-8 (decode invalid bytes as U+FFFD)",
        },
        "close_codes": [
            {key: value for key, value in asdict(close).items() if value is not None}
            for close in CLOSE_CODES
        ],
    }


# -- frames ---------------------------------------------------------------------------------

FRAME_TYPES = ("status", "data", "heartbeat", "end", "error")
FrameType = Literal["status", "data", "heartbeat", "end", "error"]
FRAMES_QUERY = "frames"
"""The stream's query parameter that picks how data frames travel (`FRAME_ENCODINGS`)."""
FRAME_ENCODINGS = ("text", "binary")
FrameEncoding = Literal["text", "binary"]
BINARY_HEADER = struct.Struct(">BIQ")
"""A binary data frame's header: kind (`BINARY_DATA`), rank, offset after the chunk."""
BINARY_DATA = 1


@dataclass(frozen=True)
class LogEvent:
    """One frame of a followed log (`to_frame` is its JSON object on the WebSocket)."""

    type: FrameType
    rank: int | None = None
    offset: int | None = None
    """For data: the byte offset just after `data` in the rank's log (resume from here)."""
    data: str = ""
    state: JobState | None = None
    reason: str | None = None
    exit_code: int | None = None
    time: float | None = None
    code: str | None = None
    """For error: the error's code (`not_found`...); `reason` is its message."""
    field: str | None = None
    close: int | None = None
    """For error: the close code that follows."""
    raw: bytes | None = dataclass_field(default=None, compare=False, repr=False)
    """For data read from a log: `data` as the valid UTF-8 bytes it was decoded from (sent as
    they are: no second encoding)."""

    def to_json(self) -> bytes:
        """The frame as JSON text, UTF-8 (the WebSocket's text frame). A data frame's text is
        escaped by whole-buffer passes (`json_string`): `json.dumps` escapes a megabyte of log
        lines a character at a time, at a seventh of the speed a follower can take it."""
        if self.type != "data":
            return json.dumps(self.to_frame()).encode()
        head = b'{"type":"data","rank":%s,"offset":%s,"data":"' % (
            b"null" if self.rank is None else b"%d" % self.rank,
            b"null" if self.offset is None else b"%d" % self.offset,
        )
        text = self.raw
        if text is None:
            try:
                text = self.data.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: JSON's own escape for it
                return json.dumps(self.to_frame()).encode()
        return b"".join((head, json_string(text), b'"}'))

    def to_binary(self) -> bytes:
        """A data frame as a binary WebSocket message: `BINARY_HEADER`, then the bytes read
        (with `frames=binary`; every other frame is `to_json`)."""
        return b"".join(self.binary_parts())

    def binary_parts(self) -> tuple[bytes, bytes]:
        """`to_binary` as its header and its payload, for a writer that sends the two without
        joining them (a megabyte copied less)."""
        if self.type != "data":
            raise ValueError(f"only data frames are binary, not {self.type}")
        payload = self.raw
        if payload is None:
            payload = self.data.encode("utf-8", "replace")
        return BINARY_HEADER.pack(BINARY_DATA, self.rank or 0, self.offset or 0), payload

    @classmethod
    def from_binary(cls, message: bytes) -> LogEvent | None:
        """A binary data frame back as its event (None: a kind this client does not know)."""
        if len(message) < BINARY_HEADER.size:
            return None
        kind, rank, offset = BINARY_HEADER.unpack_from(message)
        if kind != BINARY_DATA:
            return None
        payload: bytes | None = message[BINARY_HEADER.size :]
        try:
            text = payload.decode("utf-8")  # type: ignore[union-attr]
        except UnicodeDecodeError:  # as a text frame would have carried it
            text, payload = message[BINARY_HEADER.size :].decode("utf-8", "replace"), None
        return cls(type="data", rank=rank, offset=offset, data=text, raw=payload)

    def to_frame(self) -> dict[str, Any]:
        state = self.state.value if self.state else None
        if self.type == "status":
            return {"type": "status", "state": state, "reason": self.reason}
        if self.type == "data":
            return {"type": "data", "rank": self.rank, "offset": self.offset, "data": self.data}
        if self.type == "end":
            return {"type": "end", "state": state, "exit_code": self.exit_code}
        if self.type == "error":
            return {
                "type": "error",
                "code": self.code,
                "message": self.reason or "",
                "field": self.field,
                "close": self.close,
            }
        return {"type": "heartbeat", "time": self.time}

    @classmethod
    def from_frame(cls, frame: dict[str, Any]) -> LogEvent:
        state = frame.get("state")
        kind = frame.get("type")
        return cls(
            type=kind if kind in FRAME_TYPES else "heartbeat",
            rank=frame.get("rank"),
            offset=frame.get("offset"),
            data=frame.get("data") or "",
            state=JobState(state) if state else None,
            reason=frame.get("message") if kind == "error" else frame.get("reason"),
            exit_code=frame.get("exit_code"),
            time=frame.get("time"),
            code=frame.get("code"),
            field=frame.get("field"),
            close=frame.get("close"),
        )

    @classmethod
    def for_error(cls, error: BaseException, close: CloseCode, message: str) -> LogEvent:
        if isinstance(error, HyperPodError):
            return cls(
                type="error", code=error.code, reason=message, field=error.field, close=close.code
            )
        return cls(type="error", code="internal_error", reason=message, close=close.code)


_ESCAPES = (
    (b"\\", b"\\\\"),
    (b'"', b'\\"'),
    (b"\n", b"\\n"),
    (b"\r", b"\\r"),
    (b"\t", b"\\t"),
    (b"\x1b", b"\\u001b"),  # terminal colours and cursor moves (tqdm)
)
_CONTROL = re.compile(rb"[\x00-\x1f]")
_RARE_CONTROLS = tuple(bytes([code]) for code in range(0x20) if bytes([code]) not in dict(_ESCAPES))
"""Control characters left after the common escapes, each looked for by a memchr pass (a
translate or a regex over a megabyte costs several times more)."""


def json_string(text: bytes) -> bytes:
    """UTF-8 `text` as the inside of a JSON string (RFC 8259: quote, backslash and control
    characters escaped; everything else as it is). A pass over the whole buffer per character
    to escape, skipped when the character is absent."""
    for raw, escaped in _ESCAPES:
        if raw in text:
            text = text.replace(raw, escaped)
    if any(control in text for control in _RARE_CONTROLS):
        text = _CONTROL.sub(lambda match: b"\\u%04x" % match[0][0], text)
    return text
