"""Blocking backend work cannot starve the API: 8 cancels of jobs that ignore SIGTERM (each waits
out the grace period) run on their own pool while `GET cluster` answers at once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from .helpers import Api

STUBBORN = """import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ignoring SIGTERM", flush=True)
time.sleep(120)  # bounded: a failing test leaves nothing running for long
"""


@pytest.fixture
def hyperpod_config(hyperpod_config: dict[str, Any]) -> dict[str, Any]:
    return {**hyperpod_config, "local_max_parallel_jobs": 8}


@pytest.mark.slow
async def test_the_api_answers_while_eight_cancels_wait(api: Api, partition: Path) -> None:
    (partition / "stubborn.py").write_text(STUBBORN)
    jobs = [
        await api.submit({"name": f"stubborn{i}", "command": ["stubborn.py"]}) for i in range(8)
    ]
    for job in jobs:
        await api.wait_for(job["id"], {"RUNNING"})
        deadline = time.monotonic() + 30
        while "ignoring SIGTERM" not in (await api.get(f"jobs/{job['id']}/logs")).body["text"]:
            assert time.monotonic() < deadline, "the rank never set its SIGTERM handler"
            await asyncio.sleep(0.1)

    started = time.monotonic()
    cancels = [asyncio.ensure_future(api.delete(f"jobs/{job['id']}")) for job in jobs]
    await asyncio.sleep(0.2)
    latencies = []
    while not all(cancel.done() for cancel in cancels):
        before = time.perf_counter()
        reply = await api.get("cluster")
        latencies.append((time.perf_counter() - before) * 1000)
        assert reply.status == 200
        await asyncio.sleep(0.02)
    took = time.monotonic() - started
    replies = [cancel.result() for cancel in cancels]
    assert all(reply.status == 200 and reply.body["state"] == "CANCELLED" for reply in replies)
    assert took > 5, "the cancels did wait for the TERM-ignoring ranks"
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    print(f"\nGET cluster while 8 cancels waited {took:.1f} s: n={len(latencies)} p99={p99:.1f} ms")
    # The figure to read is the printed p99 (target < 50 ms on a quiet machine; the issue's
    # bench). What the test asserts is the mechanism: a request never queues behind a cancel,
    # which before took the API's threads for seconds (9.6 s for GET cluster); a bound far
    # above any scheduling noise of a loaded 2-core runner, far below a cancel's wait.
    assert latencies[-1] < 1500, latencies[-10:]


async def test_stopping_an_extension_that_never_started_is_harmless() -> None:
    """A server that fails before initialize_settings still calls stop_extension."""
    from jupyter_hyperpod.app import POOLS, HyperPodApp

    app = HyperPodApp()
    await app.stop_extension()
    assert set(POOLS) == {"api", "backend", "cancel", "logs"}
