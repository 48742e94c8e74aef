"""Who is "me", as Studio really runs: a real Jupyter server process running as a non-root POSIX
user (hpq-alice, as Studio's sagemaker-user), with and without Studio's metadata file naming a
user profile that is no POSIX name; another POSIX user (hpq-bob) on the same real Slurm test
cluster; both submit with plain `sbatch`. And fail closed: a server running as root for a user
name this machine does not know never shows another user's log.

Slurm's "mine" is the uid munge signs (squeue --json `user_id`, scontrol `UserId=name(uid)`),
compared with the server's own uid; the profile name stays the display and partition name.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..security.live import LiveServer
from ..test_contract import check
from .conftest import ME, OTHER, SUBMITTED, SlurmUsers, add

pytestmark = pytest.mark.slurm
PROFILE = "Data-Scientist"
"""Studio's UserProfileName: a display name, never a POSIX one."""


def wait_until(predicate: Any, timeout: float = 45.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {predicate}")


@pytest.fixture
def top() -> Iterator[Path]:
    """Outside pytest's 0700 temporary directories, so that another user can reach it."""
    path = Path(tempfile.mkdtemp(prefix="hpid-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def server(top: Path, user: str, hyperpod: dict[str, Any], metadata: dict[str, Any] | None) -> Any:
    """A `jupyter server` process as `user` (setpriv: its uid, gid and groups), its work, FSx
    root and (maybe) Studio metadata file made for it."""
    work = top / f"work-{user}"
    fs = top / f"fs-{user}"
    for path in (work, fs):
        path.mkdir()
    meta = top / f"resource-metadata-{user}.json"
    if metadata is not None:
        meta.write_text(json.dumps(metadata))
    live = LiveServer(
        work,
        {
            "orchestrator": "slurm",
            "shared_fs_root": str(fs),
            "partition": "shared",
            "job_store": str(work / "jobs.sqlite"),
            "studio_metadata_path": str(meta),
            "refresh_interval": 0.5,
            **hyperpod,
        },
    )
    live.extra_env = {"HOME": str(work)}
    if user != pwd.getpwuid(os.getuid()).pw_name:
        subprocess.run(["chown", "-R", user, str(work), str(fs)], check=True)
        live.prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
        # This venv's interpreter may live under root's home: the system one with its packages.
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        live.python = shutil.which(version, path="/usr/bin:/usr/local/bin") or sys.executable
        packages = sysconfig.get_paths()["purelib"]
        live.extra_env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), packages])
    return live


def bob_holds_every_gpu(users: SlurmUsers) -> str:
    """hpq-bob's job holds all 4 nodes' GPUs; its log lies in a home only bob can read."""
    private = users.home(OTHER, private=True)
    slurm_id = users.sbatch(
        OTHER,
        "-J",
        "bob-all",
        "-N",
        "4",
        "--gres=gpu:4",
        "-o",
        f"{private}/out-%j.log",
        script="echo bob-secret; sleep 120",
    )
    wait_until(lambda: squeue(slurm_id) == "RUNNING")
    wait_until(lambda: (Path(private) / f"out-{slurm_id}.log").exists())
    return slurm_id


def squeue(slurm_id: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%T"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def queue(live: LiveServer, **query: str) -> dict[str, Any]:
    route = "queue?refresh=true" + "".join(f"&{k}={v}" for k, v in query.items())
    status, body, _ = live.request("GET", route)
    check("/queue", "GET", status, body)
    assert status == 200, body
    return {row["id"]: row for row in body["jobs"]}


@pytest.mark.parametrize("studio", [True, False], ids=["studio-metadata", "no-metadata"])
def test_a_non_root_server_knows_its_own_jobs_by_uid(
    slurm_users: SlurmUsers, top: Path, studio: bool
) -> None:
    case = f"server as {ME}, " + (f"profile {PROFILE}" if studio else "no Studio metadata")
    bob = bob_holds_every_gpu(slurm_users)
    mine = slurm_users.sbatch(ME, "-J", "alice-sbatch", "--gres=gpu:1", script="sleep 120")
    metadata = {"UserProfileName": PROFILE, "DomainId": "d-test", "SpaceName": "s"}
    live = server(top, ME, {}, metadata if studio else None).start(timeout=120)
    try:
        status, cluster, _ = live.request("GET", "cluster")
        assert status == 200 and cluster["user"] == (PROFILE if studio else ME)

        rows = queue(live)
        add(case, "rows", len(rows))
        assert not rows[bob]["mine"] and rows[bob]["user"] == OTHER
        assert set(queue(live, mine="true")) == {mine}
        add(case, "mine by uid", 1)

        status, refused, _ = live.request("POST", "queue/adopt", {"id": bob})
        check("/queue/adopt", "POST", status, refused)
        assert status == 403 and OTHER in refused["error"]["message"]
        add(case, "adopt of another's refused (403)")
        status, denied, _ = live.request("GET", f"queue/logs?id={bob}")
        assert status == 403 and "bob-secret" not in json.dumps(denied)
        add(case, "another's private log refused (403)")

        status, adopted, _ = live.request("POST", "queue/adopt", {"id": mine})
        assert status == 200 and adopted["backend_id"] == mine, adopted
        assert adopted["user"] == (PROFILE if studio else ME)  # the display name, kept
        add(case, "own sbatch job adopted")

        status, job, _ = live.request(
            "POST",
            "jobs",
            {"name": "api-job", "command": ["sleep", "120"], "nodes": 1, "gpus_per_node": 1},
        )
        assert status in (200, 201), job
        backend_id = wait_until(
            lambda: live.request("GET", f"jobs/{job['id']}")[1].get("backend_id")
        )
        SUBMITTED.append(backend_id)
        owner = subprocess.run(
            ["squeue", "-h", "-j", backend_id, "-o", "%U"], capture_output=True, text=True
        ).stdout.strip()
        assert owner == str(pwd.getpwnam(ME).pw_uid)  # munge signed it as the server's uid
        row = queue(live)[backend_id]
        assert row["mine"] and row["job_id"] == job["id"] and row["state"] == "PENDING"
        assert row["explanation"] and "pending on debug" in row["explanation"], row
        assert f"{bob} bob-all ({OTHER}" in row["explanation"]
        add(case, "API job mine with its place in the queue")
    finally:
        live.stop()


def test_a_root_server_for_an_unknown_user_never_shows_others_logs(
    slurm_users: SlurmUsers, top: Path
) -> None:
    """A container or a Space: the server runs as root, the user is a profile name this machine
    has no account for. Root could read every file; whose permissions apply is unknown: every
    other user's log is refused, the private one and a world-readable one alike."""
    case = f"server as root, user {PROFILE} unknown here"
    bob = bob_holds_every_gpu(slurm_users)
    public = slurm_users.sbatch(OTHER, "-J", "bob-public", script="echo bob-public; sleep 120")
    live = server(top, "root", {"user": PROFILE}, None).start(timeout=120)
    try:
        rows = queue(live, state="all")
        for slurm_id in (bob, public):
            assert not rows[slurm_id]["mine"] and not rows[slurm_id]["logs_readable"]
            assert "not a POSIX account on this machine" in rows[slurm_id]["logs_reason"]
            status, denied, _ = live.request("GET", f"queue/logs?id={slurm_id}")
            check("/queue/logs", "GET", status, denied)
            assert status == 403 and "not a POSIX account" in denied["error"]["message"]
            assert "bob-secret" not in json.dumps(denied)
            add(case, "others' logs refused (403)")
        assert live.request("POST", "queue/adopt", {"id": bob})[0] == 403
        add(case, "adopt of another's refused (403)")
        add(case, "bytes of others' logs returned", 0)
    finally:
        live.stop()
