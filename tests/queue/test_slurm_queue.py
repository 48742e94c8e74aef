"""The queue on the real Slurm test cluster (accounting off): jobs submitted with `sbatch` by two
OS users in a terminal, listed from one `squeue --json`, others' read-only, mine adopted."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.core.errors import Forbidden
from jupyter_hyperpod.core.models import JobState
from jupyter_hyperpod.core.queue import QueueJob
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings

from ..cli.conftest import jupyter_env, shell  # noqa: F401 - fixtures
from ..helpers import Api
from ..test_contract import check
from .conftest import ME, OTHER, SUBMITTED, SlurmUsers

pytestmark = pytest.mark.slurm
SERVER_USER = pwd.getpwuid(os.getuid()).pw_name
"""Whom munge signs this in-process server's Slurm commands as (root here): its jobs are mine.
ME stays its display name, and the account whose permissions decide others' logs (a root
server acts for the account its user name names). A server running as a non-root user with a
Studio profile name: test_identity_matrix.py."""


def settings_for(tmp_path: Path, fs_root: Path) -> HyperPodSettings:
    return HyperPodSettings(
        orchestrator="slurm",
        shared_fs_root=str(fs_root),
        partition="shared",
        user=ME,
        job_store=str(tmp_path / "jobs.sqlite"),
    )


@pytest.fixture
def service(slurm_users: SlurmUsers, tmp_path: Path, fs_root: Path) -> Iterator[HyperPodService]:
    made = HyperPodService(settings_for(tmp_path, fs_root))
    yield made
    made.close()


def wait_until(predicate: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {predicate}")


def rows(service: HyperPodService, **filters: Any) -> dict[str, QueueJob]:
    page = service.queue(fresh=True, **filters)
    return {row.id: row for row in page.jobs}


@pytest.fixture
def busy(slurm_users: SlurmUsers) -> dict[str, str]:
    """The other user holds every GPU (2 jobs x 2 nodes x 4 GPUs), one log private and one
    world-readable; I wait behind them with two jobs."""
    private = slurm_users.home(OTHER, private=True)
    ids = {
        "theirs_private": slurm_users.sbatch(
            OTHER,
            "-J",
            "bob-private",
            "-N",
            "2",
            "--gres=gpu:4",
            "-o",
            f"{private}/out-%j.log",
            script="echo secret-output; sleep 120",
        ),
        "theirs_public": slurm_users.sbatch(
            OTHER,
            "-J",
            "bob-public",
            "-N",
            "2",
            "--gres=gpu:4",
            script="echo public-output; sleep 10",
        ),
    }
    wait_until(
        lambda: (
            subprocess.run(
                ["squeue", "-h", "-t", "R", "-o", "%i"], capture_output=True, text=True, check=False
            )
            .stdout.split()
            .__len__()
            == 2
        )
    )
    ids["mine_first"] = slurm_users.sbatch(
        SERVER_USER,
        "-J",
        "alice-first",
        "-N",
        "1",
        "--gres=gpu:1",
        script="echo mine-started; sleep 60",
    )
    ids["mine_second"] = slurm_users.sbatch(
        SERVER_USER, "-J", "alice-second", "-N", "1", "--gres=gpu:2"
    )
    # Until the scheduler has looked at them, new jobs wait with reason None.
    wait_until(
        lambda: (
            "None"
            not in subprocess.run(
                ["squeue", "-h", "-t", "PD", "-o", "%r"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
        )
    )
    return ids


def test_every_users_jobs_from_one_squeue_json(
    service: HyperPodService, busy: dict[str, str]
) -> None:
    commands = service.orchestrator.commands  # type: ignore[attr-defined]
    before = commands.calls
    page = service.queue(fresh=True)
    assert [c[0] for c in commands.history[-(commands.calls - before) :]].count("squeue") == 1
    assert commands.history[-1] == ["squeue", "--json"]
    found = {row.id: row for row in page.jobs}
    assert set(busy.values()) <= set(found)
    assert page.source == "squeue --json"
    assert page.counts["RUNNING"] >= 2 and page.counts["PENDING"] >= 2

    theirs = found[busy["theirs_private"]]
    assert (theirs.user, theirs.name, theirs.state) == (OTHER, "bob-private", JobState.RUNNING)
    assert (theirs.nodes, theirs.gpus, theirs.partition) == (2, 8, "debug")
    assert theirs.node_list and theirs.priority and theirs.submitted and theirs.started
    assert not theirs.mine and not theirs.adoptable and theirs.job_id is None

    mine = found[busy["mine_first"]]
    assert (mine.user, mine.state, mine.nodes, mine.gpus) == (SERVER_USER, JobState.PENDING, 1, 1)
    assert mine.reason == "Resources" and mine.started is None
    assert mine.mine and mine.adoptable and mine.position == 1
    second = found[busy["mine_second"]]
    assert second.position == 2 and second.reason in ("Priority", "Resources")


def test_filters_and_server_side_pages(service: HyperPodService, busy: dict[str, str]) -> None:
    assert set(rows(service, mine=True)) == {busy["mine_first"], busy["mine_second"]}
    pending = rows(service, state="PENDING")
    assert set(pending) == {busy["mine_first"], busy["mine_second"]}
    assert set(rows(service, state="running")) == {busy["theirs_private"], busy["theirs_public"]}
    assert rows(service, partition="nope") == {}
    assert len(rows(service, partition="debug")) == 4
    first = service.queue(limit=1)
    second = service.queue(limit=1, offset=1)
    assert first.total == second.total == 4 and len(first.jobs) == len(second.jobs) == 1
    assert first.jobs[0].id != second.jobs[0].id
    with pytest.raises(Exception, match="state must be"):
        service.queue(state="sleeping")


def test_my_pending_job_says_where_it_is_and_who_holds_the_gpus(
    service: HyperPodService, busy: dict[str, str]
) -> None:
    mine = rows(service)[busy["mine_first"]]
    assert mine.explanation is not None
    assert mine.explanation.startswith("Resources: 1st of 2 pending on debug")
    assert "2 running job(s) hold 4 nodes, 16 GPUs" in mine.explanation
    assert f"{busy['theirs_private']} bob-private ({OTHER}, 2 nodes, 8 GPUs" in mine.explanation
    second = rows(service)[busy["mine_second"]]
    assert second.explanation is not None and "2nd of 2 pending on debug" in second.explanation
    assert (
        f"ahead: {busy['mine_first']} alice-first ({SERVER_USER}, 1 node, 1 GPU)"
        in second.explanation
    )
    # Others' pending jobs are theirs to explain.
    assert rows(service)[busy["theirs_public"]].explanation is None


def test_others_logs_only_where_their_permissions_allow(
    service: HyperPodService, busy: dict[str, str]
) -> None:
    private = rows(service)[busy["theirs_private"]]
    assert not private.logs_readable
    assert private.logs_reason and f"{ME} may not enter" in private.logs_reason
    with pytest.raises(Forbidden):
        service.queue_logs(busy["theirs_private"])
    # The file exists and this server (root) could read it: the check is the user's, not ours.
    assert private.log and "secret-output" in Path(private.log).read_text()

    public = wait_until(
        lambda: (
            rows(service)[busy["theirs_public"]].logs_readable
            and rows(service)[busy["theirs_public"]]
        )
    )
    assert public.log and public.log.endswith(f"slurm-{busy['theirs_public']}.out")
    assert "public-output" in service.queue_logs(busy["theirs_public"]).text
    with pytest.raises(Forbidden):
        service.adopt(busy["theirs_public"])


def test_adopt_my_sbatch_job_status_logs_cancel_and_restart(
    service: HyperPodService, busy: dict[str, str], tmp_path: Path, fs_root: Path
) -> None:
    job = service.adopt(busy["mine_first"])
    assert job.backend_id == busy["mine_first"] and job.state is JobState.PENDING
    assert job.name == "alice-first" and job.spec.gpus_per_node == 1
    assert service.adopt(busy["mine_first"]).id == job.id  # twice: the same job
    listed = service.jobs()
    assert [j.id for j in listed.jobs] == [job.id]
    # Its reason in the job list says where it is in the queue.
    service.refresh(max_age=0)
    reason = service.job(job.id).state_reason or ""
    assert "1st of 2 pending on debug" in reason and "hold 4 nodes" in reason
    row = rows(service)[busy["mine_first"]]
    assert row.job_id == job.id and not row.adoptable

    # The other user's short job ends; mine starts and its log is read like any job's.
    running = wait_until(
        lambda: (j := service.job(job.id)).state is JobState.RUNNING and j, timeout=60
    )
    assert running.ranks and running.ranks[0].node

    def log_text() -> str:
        reader = service.log_reader(job.id, 0)
        try:
            return reader.read(0, 1 << 16).decode()
        finally:
            reader.close()

    wait_until(lambda: "mine-started" in log_text())

    # Adoption survives a restart: a new service on the same store knows the job.
    again = HyperPodService(settings_for(tmp_path, fs_root))
    try:
        assert again.job(job.id).backend_id == busy["mine_first"]
        cancelled = again.cancel(job.id)
        assert cancelled.state is JobState.CANCELLED
    finally:
        again.close()
    state = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", busy["mine_first"], "-o", "%T"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    assert state in ("CANCELLED", "COMPLETING")


@pytest.fixture
def hyperpod_config(slurm_users: SlurmUsers, fs_root: Path, tmp_path: Path) -> dict[str, Any]:
    return {
        "orchestrator": "slurm",
        "shared_fs_root": str(fs_root),
        "partition": "shared",
        "user": ME,
        "job_store": str(tmp_path / "jobs.sqlite"),
        "refresh_interval": 0.5,
    }


async def test_rest_queue_adopt_and_logs_match_the_contract(
    api: Api, slurm_users: SlurmUsers, busy: dict[str, str]
) -> None:
    reply = await api.get("queue", refresh="true")
    check("/queue", "GET", reply.status, reply.body)
    assert reply.status == 200 and reply.body["total"] == 4
    reply = await api.get("queue", mine="true", limit=1)
    check("/queue", "GET", reply.status, reply.body)
    assert reply.body["total"] == 2 and len(reply.body["jobs"]) == 1
    bad = await api.get("queue", limit=0)
    check("/queue", "GET", bad.status, bad.body)
    assert bad.status == 400 and bad.body["error"]["field"] == "limit"
    bad = await api.get("queue", state="sleeping")
    assert bad.status == 400 and bad.body["error"]["field"] == "state"

    denied = await api.get("queue/logs", id=busy["theirs_private"])
    check("/queue/logs", "GET", denied.status, denied.body)
    assert denied.status == 403
    refused = await api.post("queue/adopt", {"id": busy["theirs_private"]})
    check("/queue/adopt", "POST", refused.status, refused.body)
    assert refused.status == 403 and refused.body["error"]["field"] == "id"
    missing = await api.post("queue/adopt", {"id": "999999"})
    assert missing.status == 404
    bad = await api.post("queue/adopt", {"nope": 1})
    assert bad.status == 400

    adopted = await api.post("queue/adopt", {"id": busy["mine_second"]})
    check("/queue/adopt", "POST", adopted.status, adopted.body)
    assert adopted.status == 200 and adopted.body["backend_id"] == busy["mine_second"]
    job = await api.get(f"jobs/{adopted.body['id']}")
    assert job.status == 200 and job.body["state"] == "PENDING"
    cancelled = await api.delete(f"jobs/{adopted.body['id']}")
    assert cancelled.status == 200 and cancelled.body["state"] == "CANCELLED"


def test_cli_and_magic_list_adopt_and_cancel_after_a_confirmation(
    busy: dict[str, str],
    jupyter_env: dict[str, str],  # noqa: F811 - the fixture imported above
    shell: Any,  # noqa: F811
) -> None:
    table = shell.run_line_magic("hyperpod", "queue --mine")
    text = str(table)
    assert f"* {busy['mine_first']}" in text and "alice-first" in text
    assert busy["theirs_private"] not in text.split("Cluster queue")[1].split("\n1-")[0]
    assert "1st of 2 pending on debug" in text

    def cli(*args: str, answer: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jupyter_hyperpod.cli", *args],
            env=jupyter_env,
            input=answer,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    listed = cli("queue", "--json", "--state", "all")
    assert listed.returncode == 0, listed.stderr
    page = json.loads(listed.stdout)
    assert {busy["theirs_private"], busy["mine_first"]} <= {row["id"] for row in page["jobs"]}
    refused = cli("queue", "cancel", busy["theirs_private"], "--yes")
    assert refused.returncode == 5 and "read-only" in refused.stderr
    kept = cli("queue", "cancel", busy["mine_second"], answer="n\n")
    assert kept.returncode == 2 and "not cancelled" in kept.stdout + kept.stderr
    assert squeue_state(busy["mine_second"]) in ("PENDING", "RUNNING")  # bob's short job may end
    gone = cli("queue", "cancel", busy["mine_second"], answer="y\n")
    assert gone.returncode == 0, gone.stderr
    assert "Cancel alice-second" in gone.stdout and "Cancelled job" in gone.stdout + gone.stderr
    assert squeue_state(busy["mine_second"]) in ("CANCELLED", "COMPLETING")


def squeue_state(slurm_id: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%T"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


MLFLOW_JOB = """{python} - <<'PY'
import os, mlflow
mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
with mlflow.start_run(tags={{"hyperpod.job_id": os.environ["SLURM_JOB_ID"]}}):
    for step in range(3):
        mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
print("logged", flush=True)
PY"""


@pytest.mark.slow
def test_an_adopted_jobs_metrics_from_its_mlflow_run(
    slurm_users: SlurmUsers, tmp_path: Path
) -> None:
    """A job submitted with sbatch that tags its MLflow run with its Slurm id shows its curves.
    As root: this machine's Python with MLflow lives under /root, which the test users cannot
    run (the two-user tests need no Python in their jobs)."""
    fs_root = tmp_path / "fsx"
    settings = HyperPodSettings(
        orchestrator="slurm",
        shared_fs_root=str(fs_root),
        partition="shared",
        user="root",
        job_store=str(tmp_path / "jobs.sqlite"),
    )
    service = HyperPodService(settings)
    try:
        tracking = service.mlflow_uri_for_jobs
        Path(tracking.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "-J",
                "root-mlflow",
                f"--output={tmp_path}/%j.out",
                f"--export=ALL,MLFLOW_TRACKING_URI={tracking}",
                "--wrap",
                MLFLOW_JOB.format(python=sys.executable),
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        slurm_id = done.stdout.strip().split(";")[0]
        SUBMITTED.append(slurm_id)
        wait_until(lambda: squeue_state(slurm_id) in ("COMPLETED", "FAILED"), timeout=120)
        assert squeue_state(slurm_id) == "COMPLETED", (tmp_path / f"{slurm_id}.out").read_text()
        job = service.adopt(slurm_id)
        assert job.name == "root-mlflow"
        metrics = service.metrics(job.id)
        assert metrics.run is not None, metrics.message
        assert [p.value for p in metrics.metrics["loss"]] == [1.0, 0.5, pytest.approx(1 / 3)]
    finally:
        service.close()
