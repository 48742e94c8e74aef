"""A job runs the files of its submit (#24 item 1), on the local backend through the real server:
an edit while it is PENDING changes nothing; over the limit is a 400 that creates nothing;
removing it with its files removes its snapshot."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from .helpers import Api


@pytest.fixture
def hyperpod_config(hyperpod_config: dict[str, Any]) -> dict[str, Any]:
    # One job at a time: the second waits PENDING behind the first.
    return {**hyperpod_config, "local_max_parallel_jobs": 1, "snapshot_max_bytes": 1 << 20}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@e", *args],
        check=True,
        capture_output=True,
    )


async def test_an_edit_while_pending_changes_nothing_the_job_runs(
    api: Api, partition: Path
) -> None:
    project = partition / "project"
    project.mkdir()
    (project / "wait.py").write_text(
        "import os, pathlib, time\nwhile not pathlib.Path(os.environ['HYPERPOD_PARTITION'], 'go').exists():\n    time.sleep(0.05)\n"
    )
    (project / "train.py").write_text("print('ran v1', flush=True)\n")
    (project / "helper.py").write_text("VERSION = 'helper v1'\n")
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "v1")
    (project / "train.py").write_text(  # uncommitted
        "import helper\n"
        "print('ran v2 with', helper.VERSION, flush=True)\n"
        "open('result.txt', 'w').write('written by v2')\n"
    )

    blocker = await api.submit({"name": "blocker", "command": ["wait.py"], "workdir": "project"})
    job = await api.submit({"name": "train", "command": ["train.py"], "workdir": "project"})
    assert (await api.get(f"jobs/{job['id']}")).body["state"] == "PENDING"
    snapshot = job["snapshot"]
    assert snapshot["commit"] and snapshot["dirty"] and snapshot["files"] == 3
    assert snapshot["tree"] == f".hyperpod/snapshots/{job['id']}/tree"

    (project / "train.py").write_text("print('ran v3, edited while pending', flush=True)\n")
    (project / "helper.py").write_text("VERSION = 'helper v3, edited while pending'\n")
    (partition / "go").write_text("")
    await api.wait_for(blocker["id"], {"SUCCEEDED"}, timeout=30)
    done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"}, timeout=30)
    assert done["state"] == "SUCCEEDED", done
    # It ran the snapshot (the program and the module beside it), in the workdir: what it
    # wrote is where the user looks, not inside the snapshot.
    assert Path(done["ranks"][0]["log"]).read_text() == "ran v2 with helper v1\n"
    tree = partition / snapshot["tree"]
    assert (project / "result.txt").read_text() == "written by v2"
    assert not (tree / "result.txt").exists()

    reply = await api.call("DELETE", f"jobs/{job['id']}", forget="true", delete_files="true")
    assert reply.status == 200, reply.body
    assert not tree.exists()
    assert (partition / blocker["snapshot"]["tree"] / "wait.py").exists()


async def test_a_snapshot_over_the_limit_is_refused_and_creates_nothing(
    api: Api, partition: Path
) -> None:
    project = partition / "big"
    project.mkdir()
    (project / "train.py").write_text("print(1)\n")
    (project / "weights.npy").write_bytes(b"w" * (3 << 20))  # under reference_bytes: copied
    reply = await api.post("jobs", {"name": "big", "command": ["train.py"], "workdir": "big"})
    assert reply.status == 400, reply.body
    message = reply.body["error"]["message"]
    assert reply.body["error"]["field"] == "workdir"
    assert "over the limit of 1.0 MiB" in message and "weights.npy (3.0 MiB)" in message
    assert (await api.get("jobs")).body["jobs"] == []
    assert not (partition / ".hyperpod" / "snapshots").exists() or not any(
        (partition / ".hyperpod" / "snapshots").glob("big-*")
    )


async def test_rerun_runs_the_snapshot_and_with_changes_the_current_files(
    api: Api, partition: Path
) -> None:
    project = partition / "again"
    project.mkdir()
    (project / "train.py").write_text("print('ran v1', flush=True)\n")
    first = await api.submit({"name": "first", "command": ["train.py"], "workdir": "again"})
    await api.wait_for(first["id"], {"SUCCEEDED"}, timeout=30)
    (project / "train.py").write_text("print('ran v2', flush=True)\n")

    exact = await api.post(f"jobs/{first['id']}/rerun", {})
    assert exact.status == 201, exact.body
    changed = await api.post(f"jobs/{first['id']}/rerun", {"with_changes": True})
    assert changed.status == 201, changed.body
    logs = {}
    for job in (exact.body, changed.body):
        assert job["id"] != first["id"] and job["spec"]["command"] == ["train.py"]
        done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"}, timeout=30)
        logs[job["id"]] = Path(done["ranks"][0]["log"]).read_text()
    assert logs[exact.body["id"]] == "ran v1\n"
    assert logs[changed.body["id"]] == "ran v2\n"
    # The exact rerun shares the first job's objects: removing the first keeps them.
    gone = await api.call("DELETE", f"jobs/{first['id']}", forget="true", delete_files="true")
    assert gone.status == 200
    tree = partition / exact.body["snapshot"]["tree"]
    assert (tree / "train.py").read_text() == "print('ran v1', flush=True)\n"

    refused = await api.post(f"jobs/{first['id']}/rerun", {"with_changes": "maybe"})
    assert refused.status in (400, 404), refused.body
    unknown = await api.post(f"jobs/{exact.body['id']}/rerun", {"exactly": True})
    assert unknown.status == 400 and unknown.body["error"]["field"] == "exactly", unknown.body
