"""A followed pod log's body, decoded many HTTP chunks at a time.

The API server sends a followed log as HTTP/1.1 chunks of at most 32 KiB, one per flush
(`responsewriters.StreamObject` in k8s.io/apiserver). urllib3 decodes such a body one chunk per
call -- a line read for the size, a read for the data, a read for its CRLF -- so a follower keeping
up with a fast log spends its time on calls, not bytes, and writes its spool 32 KiB at a time.

`log_payloads` reads instead whatever the connection has received, up to `READ_BYTES`, and yields
the data of every chunk in it at once (views into the read: the spool writes them with one
`writev`, copying nothing), as Go's chunked reader does for `kubectl logs -f`
(net/http/internal/chunked.go: `Read` goes on to the next chunk while the buffered reader holds
one). It never waits for more than one read: a quiet log's line reaches the spool as soon as it
arrived. The format is RFC 9112 section 7.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

Pieces = list[memoryview]
"""The data one read brought: parts of one or more chunks, in order."""

# Up to this much is read and written at once (a fast log's spool is written in pieces this big).
READ_BYTES = 256 * 1024
# A chunk's size line (hex size, optional extensions) longer than this is not HTTP.
MAX_SIZE_LINE = 4096


class ChunkedBodyError(ValueError):
    """The body is not valid chunked transfer coding, or it ended before its last chunk."""


class BufferedStream(Protocol):
    def read1(self, size: int = ..., /) -> bytes: ...


class ChunkedBody:
    """Decodes a chunked body read from `stream` (an `io.BufferedReader`'s `read1`)."""

    def __init__(self, stream: BufferedStream, read_bytes: int = READ_BYTES) -> None:
        self.stream = stream
        self.read_bytes = read_bytes
        self.finished = False  # the last (zero-size) chunk has been read
        self._left = 0  # data bytes still to come in the current chunk
        self._crlf = 0  # bytes of the CRLF after a chunk's data still to skip
        self._size_line = b""  # the start of a size line split across reads

    def __iter__(self) -> Iterator[Pieces]:
        """The data of every chunk (or part of one) that each read brought; ends after the last
        chunk (its trailer is not read: the caller closes the connection)."""
        while not self.finished:
            received = self.stream.read1(self.read_bytes)
            if not received:
                raise ChunkedBodyError("the connection closed before the log's last chunk")
            pieces = self.feed(received)
            if pieces:
                yield pieces

    def feed(self, received: bytes) -> Pieces:
        """Decode the next bytes of the body: the chunk data in them."""
        pieces: Pieces = []
        view = memoryview(received)
        position, end = 0, len(received)
        while position < end and not self.finished:
            if self._left:
                take = min(self._left, end - position)
                pieces.append(view[position : position + take])
                position += take
                self._left -= take
                if not self._left:
                    self._crlf = 2
            elif self._crlf:
                skipped = min(self._crlf, end - position)
                if received[position : position + skipped] != b"\r\n"[2 - self._crlf :][:skipped]:
                    raise ChunkedBodyError("a chunk's data is not followed by CRLF")
                position += skipped
                self._crlf -= skipped
            else:
                newline = received.find(b"\n", position)
                if newline < 0:
                    self._size_line += received[position:]
                    if len(self._size_line) > MAX_SIZE_LINE:
                        raise ChunkedBodyError("a chunk size line is too long")
                    break
                line = self._size_line + received[position:newline]
                self._size_line = b""
                position = newline + 1
                self._start_chunk(line)
        return pieces

    def _start_chunk(self, line: bytes) -> None:
        size = line.split(b";", 1)[0].strip()  # (chunk extensions are ignored, as RFC 9112 allows)
        if not size or size.strip(b"0123456789abcdefABCDEF"):
            raise ChunkedBodyError(f"not a chunk size line: {line[:80]!r}")
        self._left = int(size, 16)
        self.finished = self._left == 0


def log_payloads(response: Any, read_bytes: int = READ_BYTES) -> Iterator[Pieces]:
    """The data of a followed log `response` (urllib3's, not preloaded) as it arrives: decoded
    here when it is plainly chunked, by urllib3 otherwise (a proxy's Content-Length or gzip).

    A body decoded here leaves http.client's view of the connection behind: the caller closes
    the response when done rather than returning the connection to the pool."""
    stream = getattr(getattr(response, "_fp", None), "fp", None)  # http.client's buffered reader
    plain = not response.headers.get("content-encoding")
    if stream is not None and hasattr(stream, "read1") and plain and response.chunked:
        yield from ChunkedBody(stream, read_bytes)
    else:
        for data in response.stream(read_bytes, decode_content=True):
            yield [memoryview(data)]
