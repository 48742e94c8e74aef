"""The typed client against a real Jupyter server with the extension and the local backend.

The client is synchronous: each call runs in a thread so that the server's event loop (the
test's loop) keeps serving."""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from jupyter_hyperpod.client import HyperPodClient, ServerUnreachable, api_root
from jupyter_hyperpod.core.api import log_text
from jupyter_hyperpod.core.errors import Forbidden, InvalidRequest, NotFound
from jupyter_hyperpod.core.models import JobSpec, JobState

T = TypeVar("T")
pytestmark = pytest.mark.timeout(90)


async def off_loop(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(function, *args, **kwargs))


@pytest.fixture
def client(jp_serverapp: Any, jp_fetch: Any) -> HyperPodClient:
    """jp_fetch makes the test server listen on jp_http_port."""
    return HyperPodClient(jp_serverapp.connection_url, jp_serverapp.identity_provider.token)


async def test_submit_follow_wait(client: HyperPodClient, steps_script: Path) -> None:
    job = await off_loop(
        client.submit,
        name="hello",
        command=["steps.py", "4", "0.05", "x"],
        workdir="project",
        procs_per_node=2,
    )
    assert job.id.startswith("hello-") and job.state in (JobState.PENDING, JobState.RUNNING)

    chunks = await off_loop(lambda: list(log_text(client, job.id, rank=1, follow=True)))
    final = await off_loop(client.wait, job.id, timeout=30)

    assert "".join(chunks).splitlines() == [f"rank 1 step {i} args ['x']" for i in range(4)]
    assert final.state == JobState.SUCCEEDED and final.exit_code == 0
    listed = await off_loop(client.jobs, states=[JobState.SUCCEEDED])
    assert [j.id for j in listed.jobs] == [job.id] and listed.total == 1


async def test_follow_all_ranks_and_resume_from_an_offset(
    client: HyperPodClient, steps_script: Path
) -> None:
    spec = JobSpec(
        name="multi", command=["steps.py", "3", "0.02"], workdir="project", procs_per_node=2
    )
    job = await off_loop(client.submit, spec)

    events = await off_loop(lambda: list(client.follow(job.id, rank="all")))

    assert events[0].type == "status" and events[-1].type == "end"
    assert events[-1].state == JobState.SUCCEEDED and events[-1].exit_code == 0
    text = {r: "".join(e.data for e in events if e.type == "data" and e.rank == r) for r in (0, 1)}
    assert text[1].splitlines() == [f"rank 1 step {i} args []" for i in range(3)]
    skip = len(text[0].splitlines()[0]) + 1
    resumed = await off_loop(lambda: list(client.follow(job.id, rank=0, offset=skip)))
    assert "".join(e.data for e in resumed if e.type == "data") == text[0][skip:]


async def test_closing_the_follower_leaves_the_job_running_and_cancel_stops_it(
    client: HyperPodClient, steps_script: Path
) -> None:
    job = await off_loop(
        client.submit, name="long", command=["steps.py", "1000", "0.05"], workdir="project"
    )

    def first_lines() -> list[str]:
        lines: list[str] = []
        stream = log_text(client, job.id, follow=True)
        for chunk in stream:
            lines.extend(chunk.splitlines())
            if len(lines) >= 3:
                break
        stream.close()
        return lines

    lines = await off_loop(first_lines)
    assert lines[:3] == [f"rank 0 step {i} args []" for i in range(3)]
    assert (await off_loop(client.job, job.id)).state == JobState.RUNNING

    cancelled = await off_loop(client.cancel, job.id)
    assert cancelled.state == JobState.CANCELLED
    assert (await off_loop(client.wait, job.id, timeout=5)).state == JobState.CANCELLED


async def test_errors_are_typed_with_the_server_message(
    client: HyperPodClient, jp_serverapp: Any
) -> None:
    with pytest.raises(InvalidRequest) as bad:
        await off_loop(client.submit, name="Bad Name", command=["x.py"])
    assert bad.value.field == "name" and bad.value.message == (
        "name: 'B' and 'N' must be lowercase; a space is not allowed"
        " (a job name takes lowercase letters, digits and '-')"
    )

    with pytest.raises(InvalidRequest) as template:
        await off_loop(
            client.submit, name="t", template="script", params={"script": "a.py", "nodes": "two"}
        )
    assert template.value.field == "params.nodes"

    with pytest.raises(NotFound, match="no job 'nope-123456'"):
        await off_loop(client.job, "nope-123456")
    with pytest.raises(NotFound, match="no job 'nope-123456'"):
        await off_loop(lambda: list(client.follow("nope-123456")))

    wrong = HyperPodClient(jp_serverapp.connection_url, "not-the-token")
    with pytest.raises(Forbidden, match="refused the token"):
        await off_loop(wrong.cluster)


async def test_wait_times_out(client: HyperPodClient, steps_script: Path) -> None:
    job = await off_loop(
        client.submit, name="slow", command=["steps.py", "100", "0.1"], workdir="project"
    )
    try:
        with pytest.raises(TimeoutError, match=f"job {job.id} is still"):
            await off_loop(client.wait, job.id, timeout=0.3)
    finally:
        await off_loop(client.cancel, job.id)


def test_unreachable_server_and_urls() -> None:
    with pytest.raises(
        ServerUnreachable, match=re.escape("cannot reach the Jupyter server at http://127.0.0.1:9")
    ):
        HyperPodClient("http://127.0.0.1:9/", "t", timeout=2).cluster()
    assert api_root("http://h:8888/user/a/lab") == "http://h:8888/user/a/hyperpod/api/"
    assert api_root("https://h/base") == "https://h/base/hyperpod/api/"
    assert api_root("http://h:1/hyperpod/api/") == "http://h:1/hyperpod/api/"
    with pytest.raises(InvalidRequest):
        api_root("h:8888")
