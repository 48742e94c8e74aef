"""Reads a server's WebSocket frames (RFC 6455) off a connected socket in large reads.

The log stream's clients (`client.py`, the benches) open the connection with websocket-client
and read with this: websocket-client reads at most 16 KiB a call, each behind a poll when the
socket has a timeout, which costs 1.9 ms a MiB on this machine against 0.25 ms for reads of up to
a MiB (and 0.3 ms for counting the lines of that MiB). Frames from a server are never masked;
fragments are joined; a ping is answered through `pong`.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

OPCODE_CONTINUATION = 0x0
OPCODE_TEXT = 0x1
OPCODE_BINARY = 0x2
OPCODE_CLOSE = 0x8
OPCODE_PING = 0x9
OPCODE_PONG = 0xA
READ_BYTES = 1024 * 1024
"""The most one `recv` asks for."""


class FrameError(ConnectionError):
    """The server sent something that is not a WebSocket frame of a server."""


class FrameReader:
    """`read()` -> (opcode, payload) of the next whole message, or None when the socket's
    timeout passed first (what arrived so far is kept for the next call)."""

    def __init__(self, sock: socket.socket, pong: Callable[[bytes], object]) -> None:
        self.sock = sock
        self.pong = pong
        self._buffer = bytearray()
        self._fragments: list[bytes] = []
        self._fragment_opcode = 0

    def read(self) -> tuple[int, bytes] | None:
        while True:
            frame = self._next_frame()
            if frame is None:
                return None
            fin, opcode, payload = frame
            if opcode == OPCODE_PING:
                self.pong(payload)
                continue
            if opcode == OPCODE_PONG:
                continue
            if opcode == OPCODE_CLOSE:
                return opcode, payload
            if opcode == OPCODE_CONTINUATION:
                self._fragments.append(payload)
                if not fin:
                    continue
                opcode, payload = self._fragment_opcode, b"".join(self._fragments)
                self._fragments = []
            elif not fin:
                self._fragment_opcode, self._fragments = opcode, [payload]
                continue
            return opcode, payload

    def _next_frame(self) -> tuple[bool, int, bytes] | None:
        buffer = self._buffer
        while True:
            parsed = _header(buffer)
            if parsed is not None:
                start, length = parsed
                end = start + length
                if len(buffer) >= end:
                    first = buffer[0]
                    payload = bytes(memoryview(buffer)[start:end])
                    del buffer[:end]
                    return bool(first & 0x80), first & 0x0F, payload
                want = max(end - len(buffer), 0)
            else:
                want = 14
            try:
                chunk = self.sock.recv(min(max(want, 65536), READ_BYTES))
            except TimeoutError:
                return None
            if not chunk:
                raise ConnectionResetError("the server closed the connection")
            buffer += chunk


def _header(buffer: bytearray) -> tuple[int, int] | None:
    """(where the payload starts, its length), or None while the header is incomplete."""
    if len(buffer) < 2:
        return None
    second = buffer[1]
    if second & 0x80:
        raise FrameError("the server masked a frame (RFC 6455: a server never does)")
    length = second & 0x7F
    if length == 126:
        if len(buffer) < 4:
            return None
        return 4, int.from_bytes(buffer[2:4], "big")
    if length == 127:
        if len(buffer) < 10:
            return None
        return 10, int.from_bytes(buffer[2:10], "big")
    return 2, length
