"""Reading squeue's JSON (22.05 as the test cluster prints it, and 23.02+'s wrapped numbers),
sbatch's filename patterns, the permission check for any user, and the queue's explanations."""

from __future__ import annotations

import os
import pwd
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.backends.access import readable_by
from jupyter_hyperpod.backends.slurm.queue import (
    expand_output,
    gpus_asked,
    gpus_held,
    number,
    parse_queue,
    stdout_path,
    user_id,
)
from jupyter_hyperpod.core.identity import Identity, account_named
from jupyter_hyperpod.core.models import JobState
from jupyter_hyperpod.core.queue import QueueJob, explain, parse_states, place_pending, select

from .conftest import ME, OTHER, _ensure_user

# Trimmed from `squeue --json` of the Slurm 22.05 test cluster (a running and a pending job).
RUNNING_2205: dict[str, Any] = {
    "job_id": 1,
    "name": "alicejob",
    "user_name": "qalice",
    "user_id": 1001,
    "job_state": "RUNNING",
    "state_reason": "None",
    "partition": "debug",
    "priority": 4294901759,
    "node_count": 1,
    "nodes": "node1",
    "gres_detail": ["gpu:fake:2(IDX:0-1)"],
    "tres_per_node": "gres:gpu:2",
    "tres_alloc_str": "cpu=1,node=1,billing=1",
    "submit_time": 1796113734,
    "start_time": 1796113735,
    "standard_output": "/tmp/qt/a-%j.out",
    "batch_flag": True,
    "batch_host": "node1",
    "current_working_directory": "/tmp",
}
PENDING_2205: dict[str, Any] = {
    **RUNNING_2205,
    "job_id": 2,
    "name": "bobjob",
    "user_name": "qbob",
    "user_id": 1002,
    "job_state": "PENDING",
    "state_reason": "Resources",
    "node_count": 4,
    "nodes": "",
    "gres_detail": [],
    "tres_per_node": "gres:gpu:4",
    "tres_alloc_str": "",
    "start_time": 1827649735,
    "standard_output": "",
    "priority": 4294901758,
}
# Slurm 23.02+ (data_parser v0.0.39+): numbers as {"set", "infinite", "number"}, states as lists.
RUNNING_2311: dict[str, Any] = {
    **RUNNING_2205,
    "job_id": 3,
    "job_state": ["RUNNING"],
    "priority": {"set": True, "infinite": False, "number": 500},
    "node_count": {"set": True, "infinite": False, "number": 2},
    "submit_time": {"set": True, "infinite": False, "number": 1796113734},
    "start_time": {"set": True, "infinite": False, "number": 1796113735},
    "gres_detail": ["gpu:a100:4(IDX:0-3)", "gpu:a100:4(IDX:0-3)"],
    "tres_per_node": "gres/gpu:4",
}


# In Studio: the profile name is not the POSIX name, and neither is what Slurm compares.
STUDIO_ALICE = Identity(
    name="Data-Scientist", uid=1001, login="sagemaker-user", reader=None, source="studio metadata"
)


def test_rows_from_squeue_json_of_both_formats() -> None:
    rows = {
        r.id: r
        for r in parse_queue({"jobs": [RUNNING_2205, PENDING_2205, RUNNING_2311]}, STUDIO_ALICE)
    }
    running = rows["1"]
    assert (running.state, running.gpus, running.nodes, running.node_list) == (
        JobState.RUNNING,
        2,
        1,
        "node1",
    )
    assert running.reason is None and running.mine and running.started == 1796113735.0
    assert running.log == "/tmp/qt/a-1.out"
    pending = rows["2"]
    assert (pending.state, pending.reason, pending.gpus, pending.nodes) == (
        JobState.PENDING,
        "Resources",
        16,
        4,
    )
    assert pending.started is None and pending.node_list is None and not pending.mine
    assert pending.log == "/tmp/slurm-2.out"  # sbatch's default in the working directory
    newer = rows["3"]
    assert (newer.priority, newer.nodes, newer.gpus, newer.native_state) == (500, 2, 8, "RUNNING")
    # Mine is munge's uid, whatever the names: the controller may name uid 1001 otherwise,
    # and a row without a uid is nobody's.
    renamed = {**RUNNING_2205, "user_name": "Data-Scientist", "user_id": 1002}
    nameless = {k: v for k, v in RUNNING_2205.items() if k != "user_id"}
    assert [r.mine for r in parse_queue({"jobs": [renamed, nameless]}, STUDIO_ALICE)] == [
        False,
        False,
    ]
    # Someone else's log with an account this machine cannot resolve: refused, with the reason.
    assert not pending.logs_readable and pending.logs_reason == STUDIO_ALICE.unresolved


def test_scontrol_user_id() -> None:
    assert user_id("alice(1001)") == ("alice", 1001)
    assert user_id("Data Scientist(200001)") == ("Data Scientist", 200001)
    assert user_id("(null)") == ("(null)", None) and user_id("") == ("", None)


def test_numbers_gpus_and_filename_patterns() -> None:
    assert number({"set": False, "number": 5}) is None
    assert number({"set": True, "infinite": True, "number": 0}) is None
    assert number(7) == 7 and number(None) is None
    assert gpus_held({"gres_detail": [], "tres_alloc_str": "cpu=8,gres/gpu=3,node=1"}) == 3
    assert gpus_asked({"tres_per_job": "gres:gpu:8"}, 4) == 8
    assert gpus_asked({"tres_per_task": "gres/gpu:1", "tasks": 6}, 2) == 6
    job = {"job_id": 42, "user_name": "bob", "name": "train", "batch_host": "node3.cluster"}
    assert expand_output("/o/%x-%u-%j-%N.out", job) == "/o/train-bob-42-node3.out"
    assert expand_output("/o/%5j_%%.log", job) == "/o/00042_%.log"
    array = {**job, "array_job_id": 40, "array_task_id": 2}
    assert expand_output("%A_%a.out", array) == "40_2.out"
    assert stdout_path({**job, "batch_flag": False}) is None


@pytest.fixture
def files() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create users and give files away")
    for name in (ME, OTHER):
        _ensure_user(name)
    root = Path(tempfile.mkdtemp(prefix="hpq-perm-", dir="/tmp"))
    root.chmod(0o755)
    yield root
    for path in sorted(root.rglob("*"), reverse=True):
        path.chmod(0o700)
    for path in sorted(root.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    root.rmdir()


def test_readable_by_checks_owner_group_other_and_every_directory(files: Path) -> None:
    bob = pwd.getpwnam(OTHER)
    shared = files / "shared.log"
    shared.write_text("x")
    os.chown(shared, bob.pw_uid, bob.pw_gid)
    shared.chmod(0o644)
    alice, other = account_named(ME), account_named(OTHER)
    assert readable_by(str(shared), alice) == (True, None)
    # No account (a name this machine does not know): refused even a world-readable file.
    assert readable_by(str(shared), None, "who?") == (False, "who?")
    shared.chmod(0o640)  # group bob only: alice is not in it
    ok, why = readable_by(str(shared), alice)
    assert not ok and why == f"{ME} may not read {shared} (owner {OTHER}, mode 640)"
    assert readable_by(str(shared), other) == (True, None)
    private = files / "private"
    private.mkdir()
    inner = private / "out.log"
    inner.write_text("x")
    inner.chmod(0o644)
    os.chown(private, bob.pw_uid, bob.pw_gid)
    private.chmod(0o700)
    assert readable_by(str(inner), alice) == (
        False,
        f"{ME} may not enter {private} (permissions)",
    )
    assert readable_by(str(files / "missing.log"), alice)[1] == f"no log yet at {files}/missing.log"


def _row(id: str, state: JobState, **fields: Any) -> QueueJob:
    return QueueJob(
        id=id,
        name=f"j{id}",
        user=fields.pop("user", "bob"),
        state=state,
        native_state=state.value,
        **fields,
    )


def test_place_and_explain_follow_the_schedulers_order() -> None:
    jobs = [
        _row("10", JobState.RUNNING, nodes=4, gpus=32, partition="gpu", started=1000.0),
        _row("11", JobState.PENDING, priority=5, submitted=50.0, partition="gpu"),
        _row(
            "12", JobState.PENDING, priority=9, submitted=60.0, partition="gpu", reason="Priority"
        ),
        _row(
            "13",
            JobState.PENDING,
            priority=5,
            submitted=40.0,
            partition="gpu",
            user=ME,
            reason="Resources",
        ),
        _row("14", JobState.PENDING, priority=99, partition="cpu"),
    ]
    place_pending(jobs)
    assert [j.position for j in jobs] == [None, 3, 1, 2, 1]
    text = explain(jobs[3], jobs, now=1120.0)
    assert text.startswith("Resources: 2nd of 3 pending on gpu; ahead: 12 j12 (bob, 0 nodes)")
    assert text.endswith(
        "1 running job(s) hold 4 nodes, 32 GPUs: 10 j10 (bob, 4 nodes, 32 GPUs) for 2 min"
    )
    assert explain(jobs[4], jobs).endswith("no job is running there")
    assert [j.id for j in select(jobs, mine=True, states=None, partition=None)] == []
    assert [j.id for j in select(jobs, mine=False, states=[JobState.RUNNING], partition="gpu")] == [
        "10"
    ]
    assert parse_states("") == [JobState.PENDING, JobState.RUNNING] and parse_states("all") is None
