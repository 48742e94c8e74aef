"""The followed log's chunked body, decoded many chunks a read (backends/kubernetes/chunked.py):
the same bytes as the standard library's decoder however the body is split across reads, one
piece per read however many chunks it holds, nothing held back waiting for more, errors for what
is not chunked coding, and urllib3's decoder where the body is not plain chunks (over real HTTP)."""

from __future__ import annotations

import gzip
import http.client
import io
import itertools
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import urllib3
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_hyperpod.backends.kubernetes.chunked import (
    MAX_SIZE_LINE,
    ChunkedBody,
    ChunkedBodyError,
    Pieces,
    log_payloads,
)


def encode(pieces: list[bytes], extension: bytes = b"", trailer: bytes = b"") -> bytes:
    """A chunked body: one chunk a piece (empty pieces skipped: a zero size ends the body)."""
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in pieces if p)
    return body + b"0\r\n" + trailer + b"\r\n"


def stdlib_decode(body: bytes) -> bytes:
    """The reference: http.client's own decoding of the same body."""

    class Socket:
        def makefile(self, mode: str) -> io.BytesIO:
            return io.BytesIO(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body)

    response = http.client.HTTPResponse(Socket())  # type: ignore[arg-type]
    response.begin()
    return response.read()


class Reads:
    """A buffered stream whose `read1` returns the given pieces in turn (a socket's reads)."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = list(parts)
        self.calls = 0

    def read1(self, size: int = -1) -> bytes:
        self.calls += 1
        if not self.parts:
            return b""
        part = self.parts.pop(0)
        assert len(part) <= size
        return part


def joined(reads: Iterator[Pieces] | list[Pieces] | ChunkedBody) -> bytes:
    return b"".join(b"".join(pieces) for pieces in reads)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.binary(max_size=300), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=20),
    extension=st.sampled_from([b"", b";name=value", b' ; a="b;c"']),
    trailer=st.sampled_from([b"", b"X-Trailer: 1\r\n"]),
)
def test_any_split_of_any_body_decodes_as_the_standard_library_does(
    pieces: list[bytes], cuts: list[int], extension: bytes, trailer: bytes
) -> None:
    body = encode(pieces, extension, trailer)
    decoder = ChunkedBody(Reads(split(body, cuts)), read_bytes=len(body))
    assert joined(decoder) == stdlib_decode(body) == b"".join(pieces)
    assert decoder.finished


def test_every_split_point_of_size_line_data_and_crlf() -> None:
    body = encode([b"first line\n", b"x" * 17, b"\n"], extension=b";e=1")
    for cut in range(1, len(body)):
        for second in range(cut + 1, len(body)):
            parts = [body[:cut], body[cut:second], body[second:]]
            assert (
                joined(ChunkedBody(Reads(parts), len(body))) == b"first line\n" + b"x" * 17 + b"\n"
            )


def test_a_read_holding_many_chunks_is_one_piece_and_the_trailer_is_never_read() -> None:
    chunks = [b"line %d\n" % i for i in range(40)]
    body = encode(chunks)
    stream = Reads([body[:-5], body[-5:]])  # the last read holds only the end of the body
    decoder = ChunkedBody(stream, len(body))
    got = list(decoder)
    assert len(got) == 1  # 40 chunks, one read: one spool write
    assert got[0][0].obj is got[0][-1].obj  # views into the read, not copies
    assert joined(got) == b"".join(chunks)
    assert stream.calls == 2  # and nothing read past the zero-size chunk's line


def test_what_has_arrived_is_yielded_without_waiting_for_more() -> None:
    """A quiet log: the first line must come out while the stream has nothing more to give."""
    first = encode([b"step 1\n"])[: -len(b"0\r\n\r\n")]

    class Quiet:
        def __init__(self) -> None:
            self.reads = 0

        def read1(self, size: int = -1) -> bytes:
            self.reads += 1
            if self.reads == 1:
                return first
            raise AssertionError("read again before the first line was handed over")

    decoder = iter(ChunkedBody(Quiet()))
    assert b"".join(next(decoder)) == b"step 1\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"zz\r\nab\r\n0\r\n\r\n", "not a chunk size line"),
        (b"\r\n", "not a chunk size line"),
        (b"-2\r\nab\r\n0\r\n\r\n", "not a chunk size line"),
        (b"2\r\nabXY0\r\n\r\n", "not followed by CRLF"),
        (b"4\r\nab", "closed before"),
        (b"", "closed before"),
        (b"1" * (MAX_SIZE_LINE + 1), "too long"),
    ],
)
def test_what_is_not_chunked_coding_is_an_error(body: bytes, message: str) -> None:
    with pytest.raises(ChunkedBodyError, match=message):
        list(ChunkedBody(Reads([body] if body else []), read_bytes=max(len(body), 1)))


class LogServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.gate = threading.Event()  # opened by the test: /quiet's second line may go


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    PAYLOAD = b"".join(b"[rank 0] step %d loss 0.5\n" % i for i in range(2000))

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if self.path == "/length":
            self.send_header("Content-Length", str(len(self.PAYLOAD)))
            self.end_headers()
            self.wfile.write(self.PAYLOAD)
            return
        self.send_header("Transfer-Encoding", "chunked")
        if self.path == "/gzip":
            self.send_header("Content-Encoding", "gzip")
            self.end_headers()
            packed = gzip.compress(self.PAYLOAD)
            self.wfile.write(encode([packed[i : i + 1000] for i in range(0, len(packed), 1000)]))
            return
        self.end_headers()
        if self.path == "/quiet":
            self.wfile.write(encode([b"step 1\n"])[: -len(b"0\r\n\r\n")])
            self.wfile.flush()
            assert isinstance(self.server, LogServer)
            self.server.gate.wait(10)  # the client must have the line before anything else comes
            self.wfile.write(encode([b"step 2\n"]))
            return
        lines = self.PAYLOAD.splitlines(keepends=True)  # one chunk a line, written at once
        self.wfile.write(encode(lines))

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def log_server() -> Iterator[tuple[str, LogServer]]:
    server = LogServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", server
    server.gate.set()
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("path", ["/chunks", "/length", "/gzip"])
def test_over_real_http_every_body_arrives_whole(
    log_server: tuple[str, LogServer], path: str
) -> None:
    base, _ = log_server
    with urllib3.PoolManager() as pool:
        response = pool.request("GET", base + path, preload_content=False)
        reads = list(log_payloads(response))
        response.close()
    assert joined(reads) == Handler.PAYLOAD
    if path == "/chunks":
        # 2,000 one-line chunks: decoded here, a read's worth at a time, not one a call
        assert len(reads) < 200


def test_over_real_http_a_quiet_log_line_arrives_before_the_next(
    log_server: tuple[str, LogServer],
) -> None:
    base, server = log_server
    with urllib3.PoolManager() as pool:
        response = pool.request("GET", base + "/quiet", preload_content=False)
        payloads = log_payloads(response)
        assert b"".join(next(payloads)) == b"step 1\n"
        server.gate.set()
        assert joined(payloads) == b"step 2\n"
        response.close()
