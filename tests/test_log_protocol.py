"""The log protocol (core/logprotocol.py): one close-code table, kept by every client; bad
requests close with 4000 and say why; aborted followers leave no file open."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod import client
from jupyter_hyperpod.core import errors, logprotocol
from jupyter_hyperpod.core.logprotocol import BY_CODE, CLOSE_CODES, close_for

from .helpers import Api

PROJECT = Path(__file__).resolve().parents[1]

WRITER = """import sys, time
i = 0
while True:
    print(f"line {i} " + "x" * 200, flush=True)
    i += 1
    time.sleep(0.002)
"""


def test_the_committed_table_is_the_modules() -> None:
    """docs/log-protocol.json is what `python -m jupyter_hyperpod.core.logprotocol` writes."""
    committed = json.loads((PROJECT / "docs" / "log-protocol.json").read_text())
    assert committed == logprotocol.table()


def test_the_python_client_raises_what_the_table_says() -> None:
    errored = {close.code for close in CLOSE_CODES if close.error}
    assert set(client.CLOSE_ERRORS) == errored
    for code, cls in client.CLOSE_ERRORS.items():
        assert cls.code == BY_CODE[code].error
    assert client.CLOSE_JOB_ENDED == 1000 and BY_CODE[1000].retry == "never"


@pytest.mark.parametrize(
    "text",
    [
        "plain line\n",
        'quote " backslash \\ newline \n return \r tab \t',
        "every control: " + "".join(map(chr, range(0x20))) + "\x7f",
        "\x1b[31mred\x1b[0m tqdm 12/100 [00:05<00:37]\r",
        "é ü 中 😀 \u2028\u2029 \ufffd",
        "",
    ],
)
def test_a_data_frame_is_the_json_of_its_frame(text: str) -> None:
    """The hand-made JSON of a data frame (whole-buffer escapes) parses to the same object as
    json.dumps of its frame, from the event's text or from the bytes it was read as."""
    for event in (
        logprotocol.LogEvent(type="data", rank=3, offset=123, data=text),
        logprotocol.LogEvent(type="data", rank=0, offset=0, data=text, raw=text.encode()),
    ):
        frame = event.to_json()
        frame.decode("utf-8")  # a valid text frame
        assert json.loads(frame) == event.to_frame()
    lone = logprotocol.LogEvent(type="data", rank=0, offset=1, data="\ud800")
    assert json.loads(lone.to_json()) == lone.to_frame()
    status = logprotocol.LogEvent(type="heartbeat", time=1.5)
    assert json.loads(status.to_json()) == status.to_frame()


def test_errors_map_to_their_close_codes() -> None:
    cases = {
        errors.InvalidRequest("x"): (4000, "never"),
        errors.Forbidden("x"): (4003, "never"),
        errors.PathNotAllowed("x"): (4003, "never"),
        errors.NotFound("x"): (4004, "never"),
        errors.NotConnected("x"): (4009, "never"),
        errors.BackendUnavailable("x"): (4503, "backoff"),
        errors.BackendError("x"): (1011, "limited"),
        RuntimeError("x"): (1011, "limited"),
    }
    for error, (code, retry) in cases.items():
        close = close_for(error)
        assert (close.code, close.retry) == (code, retry), error
    # A server error is retried, but not forever.
    assert BY_CODE[1011].max_retries and BY_CODE[1011].max_retries <= 10


async def test_bad_offsets_close_with_4000_naming_the_field(api: Api, partition: Path) -> None:
    (partition / "short.py").write_text("print('hi')\n")
    job = await api.submit({"name": "offsets", "command": ["short.py"]})
    cases = [
        ({"offset": -1}, "offset"),
        ({"offset": 2**63}, "offset"),
        ({"offset": "1e3"}, "offset"),
        ({"rank": "all", "offsets": "0:-5"}, "offsets"),
        ({"rank": "all", "offsets": f"0:{2**64}"}, "offsets"),
        ({"rank": "x"}, "rank"),
    ]
    for params, field in cases:
        frames, ws = await api.follow(job["id"], **params)
        assert ws.close_code == 4000, (params, frames)
        assert [f["type"] for f in frames] == ["error"], params
        assert frames[0]["field"] == field and frames[0]["code"] == "invalid_request"
    await api.wait_for(job["id"], {"SUCCEEDED"})


def _open_in(directory: Path) -> list[str]:
    """The descriptors of this process (the test server runs in it) that point into directory."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            found.append(target)
    return found


@pytest.mark.slow
async def test_aborted_followers_leave_no_descriptor_open(api: Api, partition: Path) -> None:
    (partition / "writer.py").write_text(WRITER)
    # The watchdog keeps one reader per running rank by design (its step clocks): off here, so
    # that what stays open is only what the followers left.
    job = await api.submit(
        {
            "name": "leak",
            "command": ["writer.py"],
            "procs_per_node": 2,
            "watchdog": {"enabled": False},
        }
    )
    await api.wait_for(job["id"], {"RUNNING"})
    job_dir = partition / ".hyperpod" / "jobs" / job["id"]
    try:
        followers = 24
        for round_ in range(followers):
            ws = await api._ws_fetch(
                "hyperpod",
                "api",
                "jobs",
                job["id"],
                "logs",
                "stream",
                params={"rank": "all"},
            )
            for _ in range(3 + round_ % 4):
                assert await asyncio.wait_for(ws.read_message(), 10) is not None
            if round_ % 2:
                ws.close()  # a clean close
            else:
                ws.protocol.stream.close()  # a dropped connection: no close frame
        deadline = asyncio.get_running_loop().time() + 10
        while _open_in(job_dir) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        assert _open_in(job_dir) == []
        print(f"\n{followers} aborted followers: {len(_open_in(job_dir))} descriptors left open")
    finally:  # the writer never ends by itself
        await api.delete(f"jobs/{job['id']}")


async def test_the_python_client_stops_at_a_refusal_with_the_whole_message(
    jp_serverapp: Any, jp_fetch: Any, partition: Path
) -> None:
    """A 4000 close is not retried; the error frame's message and field reach the caller."""
    from jupyter_hyperpod.client import HyperPodClient

    (partition / "short.py").write_text("print('hi')\n")
    api_client = HyperPodClient(jp_serverapp.connection_url, jp_serverapp.identity_provider.token)
    loop = asyncio.get_running_loop()
    job = await loop.run_in_executor(
        None, lambda: api_client.submit(name="c", command=["short.py"])
    )

    def follow() -> None:
        list(api_client.follow(job.id, offset=2**60))

    started = time.monotonic()
    with pytest.raises(errors.InvalidRequest) as refused:
        await loop.run_in_executor(None, follow)
    assert refused.value.field == "offset" and "between 0 and" in refused.value.message
    assert time.monotonic() - started < 5, "a refusal is not retried"


# -- binary data frames (frames=binary) -----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["plain line\n", "every control: " + "".join(map(chr, range(0x20))), "é 中 😀 \ufffd", ""],
)
def test_a_binary_data_frame_is_the_table_header_and_the_bytes(text: str) -> None:
    """The binary frame is the header docs/log-protocol.json describes, then the log's bytes;
    read back it is the same event as its text frame's."""
    layout = logprotocol.table()["binary_data"]
    event = logprotocol.LogEvent(type="data", rank=7, offset=2**40 + 3, data=text)
    frame = event.to_binary()
    size = layout["header_bytes"]
    assert frame[size:] == text.encode()
    assert frame[0] == layout["fields"][0]["value"] == logprotocol.BINARY_DATA
    assert int.from_bytes(frame[1:5], "big") == 7
    assert int.from_bytes(frame[5:13], "big") == 2**40 + 3
    back = logprotocol.LogEvent.from_binary(frame)
    assert back is not None and back.to_frame() == json.loads(event.to_json())
    assert b"".join(event.binary_parts()) == frame


def test_a_binary_frame_of_invalid_utf8_reads_as_its_text_frame() -> None:
    """Invalid bytes (a log cut by a crash) read as U+FFFD, as the server's text frame has them."""
    raw = b"ok \xff\xfe broken \xe4\xb8"
    header = logprotocol.BINARY_HEADER.pack(logprotocol.BINARY_DATA, 0, len(raw))
    back = logprotocol.LogEvent.from_binary(header + raw)
    assert back is not None and back.data == raw.decode("utf-8", "replace") and back.raw is None
    # A kind this client does not know, or a frame shorter than the header: skipped.
    assert logprotocol.LogEvent.from_binary(b"\x09" + header[1:] + raw) is None
    assert logprotocol.LogEvent.from_binary(b"\x01\x00") is None
    with pytest.raises(ValueError):
        logprotocol.LogEvent(type="heartbeat", time=1.0).to_binary()


def test_the_frame_reader_reads_what_a_server_sends() -> None:
    """Frames of 7-bit, 16-bit and 64-bit lengths, a fragmented message, a ping (answered), a
    close; a timeout in the middle of a frame keeps what arrived."""
    import socket

    from jupyter_hyperpod.core import wsreader
    from jupyter_hyperpod.wswrite import frame_header

    server, client_side = socket.socketpair()
    pongs: list[bytes] = []
    reader = wsreader.FrameReader(client_side, pongs.append)
    big = b"x" * 70_000
    server.sendall(frame_header(5) + b"hello")
    server.sendall(frame_header(300) + b"y" * 300)
    server.sendall(frame_header(len(big)) + big)
    server.sendall(bytes([0x01, 3]) + b"abc" + bytes([0x89, 2]) + b"pi" + bytes([0x80, 3]) + b"def")
    assert reader.read() == (wsreader.OPCODE_BINARY, b"hello")
    assert reader.read() == (wsreader.OPCODE_BINARY, b"y" * 300)
    assert reader.read() == (wsreader.OPCODE_BINARY, big)
    assert reader.read() == (wsreader.OPCODE_TEXT, b"abcdef") and pongs == [b"pi"]
    client_side.settimeout(0.05)
    server.sendall(frame_header(10) + b"half")
    assert reader.read() is None  # timed out mid-frame
    server.sendall(b"-whole")
    assert reader.read() == (wsreader.OPCODE_BINARY, b"half-whole")
    server.sendall(bytes([0x88, 2]) + (1000).to_bytes(2, "big"))
    assert reader.read() == (wsreader.OPCODE_CLOSE, (1000).to_bytes(2, "big"))
    server.sendall(bytes([0x82, 0x81]) + b"mask" + b"z")
    with pytest.raises(wsreader.FrameError):
        reader.read()
    server.close()
    with pytest.raises(ConnectionResetError):  # the server went away
        wsreader.FrameReader(client_side, pongs.append).read()
    client_side.close()


async def test_binary_frames_carry_what_text_frames_carry(api: Api, partition: Path) -> None:
    """frames=binary: the same text and offsets as the JSON frames, of one rank and of rank=all;
    other frames stay JSON text; an unknown encoding closes with 4000 naming the field."""
    (partition / "mixed.py").write_text(
        "import sys\n"
        "for i in range(3000):\n"
        "    print(f'line {i} é 中 \\x1b[31m\"q\"\\\\ \\t', flush=i % 500 == 0)\n"
        "sys.stdout.buffer.write(b'cut \\xff\\xfe end\\n')\n"
    )
    job = await api.submit({"name": "binary", "command": ["mixed.py"]})
    await api.wait_for(job["id"], {"SUCCEEDED"})

    async def binary_follow(**params: Any) -> tuple[list[Any], Any]:
        ws = await api._ws_fetch(
            "hyperpod",
            "api",
            "jobs",
            job["id"],
            "logs",
            "stream",
            params={"frames": "binary", **{k: str(v) for k, v in params.items()}},
        )
        messages = []
        while (message := await asyncio.wait_for(ws.read_message(), 30)) is not None:
            messages.append(message)
        return messages, ws

    for params in ({}, {"rank": "all"}, {"offset": 1000}):
        text_frames, _ = await api.follow(job["id"], **params)
        messages, ws = await binary_follow(**params)
        assert ws.close_code == 1000
        assert any(isinstance(m, bytes) for m in messages), "data frames are binary"
        frames = []
        for message in messages:
            if isinstance(message, bytes):
                event = logprotocol.LogEvent.from_binary(message)
                assert event is not None
                frames.append(event.to_frame())
            else:
                frames.append(json.loads(message))
                assert frames[-1]["type"] != "data"
        assert frames == text_frames, params
    messages, ws = await binary_follow(frames="json")
    assert ws.close_code == 4000
    assert json.loads(messages[0])["field"] == "frames"


async def test_the_python_client_follows_binary_frames(
    jp_serverapp: Any, jp_fetch: Any, partition: Path
) -> None:
    """The client asks for binary frames and yields the same events as the text stream has."""
    from jupyter_hyperpod.client import HyperPodClient

    (partition / "lines.py").write_text("for i in range(20000):\n    print(f'line {i} é')\n")
    api_client = HyperPodClient(jp_serverapp.connection_url, jp_serverapp.identity_provider.token)
    loop = asyncio.get_running_loop()
    job = await loop.run_in_executor(
        None, lambda: api_client.submit(name="b", command=["lines.py"])
    )
    assert "frames=binary" in api_client._stream_url(job.id, 0, {0: 0})
    events = await loop.run_in_executor(None, lambda: list(api_client.follow(job.id)))
    data = [e for e in events if e.type == "data"]
    text = "".join(e.data for e in data)
    assert text == "".join(f"line {i} é\n" for i in range(20000))
    assert data[-1].offset == len(text.encode()) and events[-1].type == "end"


# -- followers of one job share its state checks (logprotocol.JobLooks) ----------------------


class _CountingSource:
    """A job whose state the test sets, and a count of the store reads made for it."""

    def __init__(self) -> None:
        self.state = logprotocol.JobState.RUNNING
        self.reads = 0

    def job(self, job_id: str) -> Any:
        self.reads += 1
        return _View(self.state)

    def log_reader(self, job_id: str, rank: int = 0) -> Any:
        return _EmptyLog()


class _View:
    def __init__(self, state: logprotocol.JobState) -> None:
        self.state, self.state_reason, self.exit_code = state, None, 0


class _EmptyLog:
    def read(self, offset: int, max_bytes: int) -> bytes:
        return b""

    def close(self) -> None:
        pass


def test_followers_of_one_job_share_one_state_check() -> None:
    now = [0.0]
    source = _CountingSource()
    looks = logprotocol.JobLooks(source, fresh_for=0.125, clock=lambda: now[0])
    followers = [
        logprotocol.Follow(source, "j", {0: 0}, clock=lambda: now[0], looks=looks)
        for _ in range(200)
    ]
    for follow in followers:
        follow.open()
        follow.step()  # each follower's first look
    first = source.reads
    for tick in range(1, 9):  # 2 s of state checks, every 0.25 s
        now[0] = tick * logprotocol.STATE_CHECK_SECONDS
        for follow in followers:
            follow.step()
    assert source.reads - first == 8, "one store read a check for all 200, not 200"

    source.state = logprotocol.JobState.SUCCEEDED
    now[0] += logprotocol.STATE_CHECK_SECONDS
    ends = [follow.step() for follow in followers]
    assert all(step.done and step.events[-1].type == "end" for step in ends)


def test_a_follow_without_shared_looks_reads_the_job_at_each_check() -> None:
    now = [0.0]
    source = _CountingSource()
    follow = logprotocol.Follow(source, "j", {0: 0}, clock=lambda: now[0])
    follow.open()
    for tick in range(5):
        now[0] = tick * logprotocol.STATE_CHECK_SECONDS
        follow.step()
    assert source.reads == 5
