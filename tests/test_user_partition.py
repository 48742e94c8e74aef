"""`user` partition mode: each user sees only their own directory of the shared file system."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .helpers import Api


@pytest.fixture
def hyperpod_config(hyperpod_config: dict[str, Any], fs_root: Path) -> dict[str, Any]:
    for user in ("alice", "bob"):
        (fs_root / user).mkdir()
        (fs_root / user / f"{user}-notes.txt").write_text(user)
    return {**hyperpod_config, "partition": "user"}


async def test_a_user_partition_never_shows_another_user(api: Api) -> None:
    cluster = (await api.get("cluster")).body
    assert cluster["filesystem"]["partition"].endswith("/alice")
    names = [e["name"] for e in (await api.get("files")).body["entries"]]
    assert names == ["alice-notes.txt"]
    for path in ("../bob", "../bob/bob-notes.txt", "/bob"):
        reply = await api.get("files", path=path)
        assert reply.status == 403
    reply = await api.post("jobs", {"name": "peek", "command": ["ls"], "workdir": "../bob"})
    assert reply.status == 403 and reply.body["error"]["field"] == "workdir"
