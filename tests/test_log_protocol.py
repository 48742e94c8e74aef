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
