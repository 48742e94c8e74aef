"""`user` partition mode: each user sees only their own directory of the shared file system."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..helpers import Api


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


SECRET = "bob-private: [this line would be quoted by a YAML error\n"


@pytest.mark.parametrize(
    ("template", "params", "field"),
    [
        ("qlora-finetune", {"config": "cfg.yaml", "output_dir": "../bob/out"}, "output_dir"),
        ("qlora-finetune", {"config": "cfg.yaml", "model_id": "../bob/model"}, "model_id"),
        ("qlora-finetune", {"config": "cfg.yaml", "dataset": "../bob/data.jsonl"}, "dataset"),
        ("qlora-finetune", {"config": "cfg.yaml", "output_dir": "to-bob/out"}, "output_dir"),
        ("evaluate", {"config": "cfg.yaml", "output_dir": "to-bob"}, "output_dir"),
        ("qlora-finetune", {"config": "../bob/secret.yaml"}, "config"),
        ("qlora-finetune", {"config": "bob-secret.yaml"}, "config"),
        ("evaluate", {"config": "to-bob/secret.yaml"}, "config"),
        ("script", {"script": "to-bob/run.py"}, "script"),
    ],
)
async def test_no_template_parameter_reaches_another_user(
    api: Api, fs_root: Path, template: str, params: dict[str, str], field: str
) -> None:
    (fs_root / "bob" / "secret.yaml").write_text(SECRET)
    (fs_root / "bob" / "run.py").write_text("print('bob')\n")
    (fs_root / "alice" / "cfg.yaml").write_text("output_dir: out\nmax_steps: 1\n")
    (fs_root / "alice" / "to-bob").symlink_to(fs_root / "bob")
    (fs_root / "alice" / "bob-secret.yaml").symlink_to(fs_root / "bob" / "secret.yaml")
    body = {"name": "peek", "template": template, "params": params}
    for route in ("jobs/render", "jobs"):
        reply = await api.post(route, body)
        assert reply.status == 403, reply.body
        assert reply.body["error"]["field"] == f"params.{field}"
        assert "outside your partition" in reply.body["error"]["message"] or (
            "above your partition" in reply.body["error"]["message"]
        )
        assert "bob-private" not in str(reply.body)
    assert (await api.get("jobs")).body["total"] == 0
