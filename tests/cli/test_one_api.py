"""One API, two implementations: the same scenario (submit, jobs, job, logs, follow, cancel,
diff, compare, files, templates, render, diagnose) through the core in this process
(`HyperPodService`) and through the REST client against a real Jupyter server
(`HyperPodClient`) gives the same results.

Both run on the same partition with the local backend; each keeps its own job history, so each
sees only the jobs it submitted."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from jupyter_hyperpod.client import HyperPodClient
from jupyter_hyperpod.core.api import HyperPodAPI, log_text
from jupyter_hyperpod.core.errors import InvalidRequest, NotFound
from jupyter_hyperpod.core.models import JobState
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings

T = TypeVar("T")
pytestmark = pytest.mark.timeout(120)


async def off_loop(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """The server runs on the test's event loop: blocking calls go to a thread."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(function, *args, **kwargs))


def wait(api: HyperPodAPI, job_id: str, timeout: float = 30) -> Any:
    import time

    deadline = time.monotonic() + timeout
    while True:
        job = api.job(job_id)
        if job.state.finished or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def scenario(api: HyperPodAPI) -> dict[str, Any]:
    """Every operation of the protocol that the local backend answers, as comparable data."""
    seen: dict[str, Any] = {}
    seen["templates"] = [t.model_dump() for t in api.templates()]
    seen["files"] = [(e.name, e.type) for e in api.files("project").entries]
    seen["render"] = api.render(
        name="steps", template="script", params={"script": "project/steps.py", "args": "2 0"}
    ).spec.model_dump()

    job = api.submit(name="steps", command=["steps.py", "3", "0.01", "x"], workdir="project")
    seen["submitted"] = (job.name, job.state in (JobState.PENDING, JobState.RUNNING))
    events = list(api.follow(job.id, rank="all"))
    seen["follow"] = (
        events[0].type,
        events[-1].type,
        events[-1].state,
        "".join(e.data for e in events if e.type == "data"),
    )
    final = wait(api, job.id)
    seen["job"] = (final.state, final.exit_code, final.spec.model_dump())
    seen["logs"] = api.logs(job.id, tail=2).text
    seen["log_text"] = "".join(log_text(api, job.id, follow=True))

    long = api.submit(name="long", command=["steps.py", "1000", "0.05"], workdir="project")
    page = api.jobs(states=[JobState.PENDING, JobState.RUNNING])
    seen["unfinished"] = [j.id == long.id for j in page.jobs]
    cancelled = api.cancel(long.id)
    seen["cancel"] = cancelled.state
    seen["cancel again"] = api.cancel(long.id).state
    listed = api.jobs(limit=10)
    seen["jobs"] = (listed.total, [j.name for j in listed.jobs])
    seen["succeeded"] = [j.name for j in api.jobs(states=[JobState.SUCCEEDED]).jobs]
    diff = api.diff(job.id, long.id)
    seen["diff"] = (
        [(c.field, c.a, c.b) for c in diff.spec],
        [f.path for f in diff.code.files],
        diff.environment.same,
    )
    compared = api.compare([job.id, long.id])
    seen["compare"] = ([j.state for j in compared.jobs], compared.differing)
    gone = api.forget(long.id, delete_files=True)
    seen["forget"] = (gone.id == long.id, gone.cancelled, gone.files_deleted)
    seen["forget dir"] = gone.job_dir == f".hyperpod/jobs/{long.id}"
    seen["forgotten"] = [j.id == long.id for j in api.jobs(limit=10).jobs]

    errors = []
    for call in (
        lambda: api.job("nope-123456"),
        lambda: api.logs(job.id, rank=5),
        lambda: api.files("no-such-dir"),
        lambda: api.submit(name="Bad Name", command=["x.py"]),
        lambda: api.compare([job.id]),
        lambda: api.diff(job.id, "nope-123456"),
    ):
        try:
            call()
        except (InvalidRequest, NotFound) as error:
            errors.append((type(error).__name__, error.field, error.message))
    seen["errors"] = errors
    diagnosis = api.diagnose()
    seen["diagnose"] = (diagnosis.orchestrator, [c.name for c in diagnosis.checks])
    return seen


async def test_the_service_and_the_client_answer_the_same(
    jp_serverapp: Any,
    jp_fetch: Any,
    hyperpod_config: dict[str, Any],
    steps_script: Path,
    tmp_path: Path,
) -> None:
    client = HyperPodClient(jp_serverapp.connection_url, jp_serverapp.identity_provider.token)
    service = HyperPodService(
        HyperPodSettings(**{**hyperpod_config, "job_store": str(tmp_path / "own.sqlite")})
    )
    try:
        through_rest = await off_loop(scenario, client)
        in_process = await off_loop(scenario, service)
    finally:
        service.close()

    assert through_rest == in_process
    # And the scenario saw what it should (so that equal is not equally empty).
    assert in_process["job"][:2] == (JobState.SUCCEEDED, 0)
    assert in_process["follow"][:3] == ("status", "end", JobState.SUCCEEDED)
    assert in_process["logs"] == "rank 0 step 1 args ['x']\nrank 0 step 2 args ['x']\n"
    assert in_process["log_text"].splitlines() == [f"rank 0 step {i} args ['x']" for i in range(3)]
    assert in_process["cancel"] == in_process["cancel again"] == JobState.CANCELLED
    assert in_process["unfinished"] == [True]
    assert (
        in_process["forget"] == (True, False, True)
        and in_process["forget dir"]
        and in_process["forgotten"] == [False]
    )
    assert in_process["jobs"] == (2, ["long", "steps"]) and in_process["succeeded"] == ["steps"]
    assert in_process["files"] == [("steps.py", "file")]
    assert [name for name, _, _ in in_process["errors"]] == [
        "NotFound",
        "InvalidRequest",
        "NotFound",
        "InvalidRequest",
        "InvalidRequest",
        "NotFound",
    ]
    assert in_process["diff"] == (
        [
            ("command", ["steps.py", "3", "0.01", "x"], ["steps.py", "1000", "0.05"]),
            ("name", "steps", "long"),
        ],
        [],
        True,
    )
    assert in_process["compare"] == ([JobState.SUCCEEDED, JobState.CANCELLED], ["command"])
    assert in_process["diagnose"][0] == "local" and "partition" in in_process["diagnose"][1]


async def test_the_magics_take_either_implementation(
    jp_serverapp: Any,
    jp_fetch: Any,
    shell: Any,
    hyperpod_config: dict[str, Any],
    steps_script: Path,
    tmp_path: Path,
) -> None:
    """`HyperPodMagics.api` is whichever implementation it is given: no adapter in between."""
    magics = shell.magics_manager.registry["HyperPodMagics"]
    client = HyperPodClient(jp_serverapp.connection_url, jp_serverapp.identity_provider.token)
    service = HyperPodService(
        HyperPodSettings(**{**hyperpod_config, "job_store": str(tmp_path / "own.sqlite")})
    )
    try:
        magics.api = client
        job = await off_loop(shell.run_line_magic, "hyperpod", "submit -w project/steps.py 1 0")
        assert (await off_loop(client.job, job.id)).state == JobState.SUCCEEDED
        listed = await off_loop(shell.run_line_magic, "hyperpod", "jobs")
        assert [j.id for j in listed] == [job.id]

        magics.api = service
        assert list(await off_loop(shell.run_line_magic, "hyperpod", "jobs")) == []
        mine = await off_loop(shell.run_line_magic, "hyperpod", "submit -w project/steps.py 1 0")
        assert [j.id for j in await off_loop(shell.run_line_magic, "hyperpod", "jobs")] == [mine.id]
        assert [j.id for j in (await off_loop(client.jobs)).jobs] == [job.id]
    finally:
        magics.close()
