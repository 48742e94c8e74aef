"""The local queue: the jobs of every server sharing one job store (two users' servers on this
machine), through the service and through the REST client; others' logs only where the files'
permissions let this user read them."""

from __future__ import annotations

import asyncio
import functools
import os
import pwd
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from jupyter_hyperpod.backends.local import LocalOrchestrator
from jupyter_hyperpod.client import HyperPodClient
from jupyter_hyperpod.core.errors import Forbidden, InvalidRequest
from jupyter_hyperpod.core.identity import Identity, account_named
from jupyter_hyperpod.core.models import JobState
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings

from .conftest import ME, OTHER, _ensure_user

T = TypeVar("T")
SLEEP = [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"]


@pytest.fixture(scope="module")
def users() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create the two users")
    for name in (ME, OTHER):
        _ensure_user(name)


def server_of(user: str, fs_root: Path, store: Path, *, as_uid: bool = False) -> HyperPodService:
    """`user`'s server. The local queue's "mine" is the OS user the jobs run as: `as_uid` gives
    the server that user's uid as its identity (this test process is root for both servers;
    the real thing, a server process per user, is tests/queue/test_identity_matrix.py)."""
    settings = HyperPodSettings(
        orchestrator="local",
        shared_fs_root=str(fs_root),
        partition="user",
        user=user,
        job_store=str(store),
        local_max_parallel_jobs=2,
    )
    if not as_uid:
        return HyperPodService(settings)
    account = account_named(user)
    assert account is not None
    identity = Identity(name=user, uid=account.uid, login=user, reader=account, source="settings")
    return HyperPodService(
        settings, orchestrator=LocalOrchestrator(settings=settings, identity=identity)
    )


@pytest.fixture
def fs_root() -> Iterator[Path]:
    """Outside pytest's 0700 temporary directories, so that each user can reach the root."""
    root = Path(tempfile.mkdtemp(prefix="hpq-fs-", dir="/tmp"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def theirs(users: None, fs_root: Path, tmp_path: Path) -> Iterator[HyperPodService]:
    service = server_of(OTHER, fs_root, tmp_path / "jobs.sqlite", as_uid=True)
    # Their partition is theirs alone, as a per-user partition should be.
    info = pwd.getpwnam(OTHER)
    os.chown(service.partition.root, info.pw_uid, info.pw_gid)
    service.partition.root.chmod(0o700)
    yield service
    for job in service.jobs().jobs:
        service.cancel(job.id)
    service.close()


@pytest.fixture
def mine(users: None, fs_root: Path, tmp_path: Path) -> Iterator[HyperPodService]:
    service = server_of(ME, fs_root, tmp_path / "jobs.sqlite")
    yield service
    for job in service.jobs().jobs:
        service.cancel(job.id)
    service.close()


def test_every_server_sharing_the_store(mine: HyperPodService, theirs: HyperPodService) -> None:
    other = theirs.submit({"name": "their-job", "command": SLEEP})
    own = mine.submit({"name": "my-job", "command": SLEEP})
    # Two at a time: one of their next two waits (per server or per store alike).
    later = [theirs.submit({"name": f"their-next-{i}", "command": SLEEP}) for i in range(2)]
    page = mine.queue(fresh=True)
    found = {row.id: row for row in page.jobs}
    assert set(found) == {other.id, own.id, *(j.id for j in later)}
    assert page.source == "job store"
    assert found[other.id].user == OTHER and not found[other.id].mine
    assert found[own.id].mine and found[own.id].job_id == own.id and not found[own.id].adoptable
    waiting = [found[j.id] for j in later if found[j.id].state is JobState.PENDING]
    assert waiting and waiting[0].position == 1 and waiting[0].partition == "local"
    assert {r.id for r in mine.queue(mine=True).jobs} == {own.id}

    row = found[other.id]
    deadline = time.monotonic() + 20
    while not (row.log and Path(row.log).exists()):
        assert time.monotonic() < deadline, "their job never started"
        time.sleep(0.2)
    # Their log lies in their 0700 partition: not for me, even though this server (root) could.
    row = next(r for r in mine.queue(fresh=True).jobs if r.id == other.id)
    assert not row.logs_readable
    assert f"{ME} may not enter {theirs.partition.root} (permissions)" == row.logs_reason
    with pytest.raises(Forbidden):
        mine.queue_logs(other.id)
    with pytest.raises(Forbidden):
        mine.adopt(other.id)
    assert mine.adopt(own.id).id == own.id  # already in my job list: that job
    # My own log is readable once the job has written it.
    deadline = time.monotonic() + 20
    while "started" not in _text(mine, own.id):
        assert time.monotonic() < deadline, "my job never wrote its log"
        time.sleep(0.2)


def _text(service: HyperPodService, queue_id: str) -> str:
    try:
        return service.queue_logs(queue_id).text
    except Forbidden:
        return ""


async def off_loop(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(function, *args, **kwargs))


@pytest.fixture
def hyperpod_config(users: None, fs_root: Path, tmp_path: Path) -> dict[str, Any]:
    return {
        "orchestrator": "local",
        "shared_fs_root": str(fs_root),
        "partition": "user",
        "user": ME,
        "job_store": str(tmp_path / "jobs.sqlite"),
        "refresh_interval": 0.3,
    }


async def test_the_rest_client(jp_serverapp: Any, jp_fetch: Any, theirs: HyperPodService) -> None:
    other = await off_loop(theirs.submit, {"name": "their-job", "command": SLEEP})
    client = HyperPodClient(jp_serverapp.connection_url, jp_serverapp.identity_provider.token)
    own = await off_loop(client.submit, {"name": "my-job", "command": SLEEP})
    page = await off_loop(client.queue, fresh=True)
    assert {r.id for r in page.jobs} == {other.id, own.id} and page.total == 2
    assert [r.id for r in (await off_loop(client.queue, mine=True)).jobs] == [own.id]
    assert (await off_loop(client.queue, limit=1, offset=1)).jobs[0].id in {other.id, own.id}
    with pytest.raises(Forbidden):
        await off_loop(client.queue_logs, other.id)
    with pytest.raises(InvalidRequest):
        await off_loop(client.queue, state="sleeping")
    await off_loop(client.cancel, own.id)
