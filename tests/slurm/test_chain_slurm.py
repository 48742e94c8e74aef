"""A 3-link chain on the real Slurm test cluster (#24 items 4 and 5): each link goes to Slurm at
once with `--dependency=afterok:<id>`, Slurm holds the later ones (reason Dependency); the middle
link fails, and the last, which Slurm would hold forever (DependencyNeverSatisfied), ends
CANCELLED with our reason; the chain then resumes from the failed link."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

from ..helpers import Api
from .test_rest_slurm import slurm_state, until_finished

pytestmark = pytest.mark.slurm


def slurm_reason(slurm_id: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%r"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


async def test_a_failed_middle_link_cancels_the_held_last_one_with_our_reason(
    api: Api, partition: Path
) -> None:
    project = partition / "chain"
    project.mkdir()
    (project / "prepare.py").write_text(
        "import pathlib, time\ntime.sleep(4)\npathlib.Path('data.txt').write_text('prepared')\n"
    )
    (project / "train.py").write_text(
        "import sys\nprint('train: the data is', open('data.txt').read(), flush=True)\nsys.exit(3)\n"
    )
    (project / "evaluate.py").write_text("print('evaluated', flush=True)\n")
    common = {"workdir": "chain", "launcher": "plain"}
    prepare = await api.submit({"name": "prepare", "command": ["prepare.py"], **common})
    train = await api.submit(
        {"name": "train", "command": ["train.py"], "after": [prepare["id"]], **common}
    )
    evaluate = await api.submit(
        {"name": "evaluate", "command": ["evaluate.py"], "after": [train["id"]], **common}
    )
    # On Slurm at once, held by Slurm, not by the server.
    assert train["backend_id"] and evaluate["backend_id"] and evaluate["held"] is None
    script = (partition / ".hyperpod" / "jobs" / evaluate["id"] / "job.sbatch").read_text()
    assert f"#SBATCH --dependency=afterok:{train['backend_id']}\n" in script
    assert slurm_state(evaluate["backend_id"]) == "PENDING"
    assert slurm_reason(evaluate["backend_id"]) == "Dependency"
    # The queue answers from a shared squeue snapshot that may predate the last submit (or
    # Slurm's first scheduling pass, reason None): ask for a fresh one until it names the wait.
    deadline = time.monotonic() + 15
    while True:
        queue = (await api.get("queue", mine="true", refresh="true")).body
        reasons = {row["id"]: row.get("reason") for row in queue["jobs"]}
        if reasons.get(evaluate["backend_id"]) == "Dependency" or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert reasons.get(evaluate["backend_id"]) == "Dependency", queue["jobs"]

    failed = await until_finished(api, train, timeout=90)
    assert failed["state"] == "FAILED", failed
    cancelled = await until_finished(api, evaluate, timeout=60)
    assert cancelled["state"] == "CANCELLED", cancelled
    assert cancelled["state_reason"].startswith("train failed: "), cancelled["state_reason"]
    assert cancelled["state_reason"].endswith(f"({train['id']})")
    deadline = time.monotonic() + 20
    while slurm_state(evaluate["backend_id"]) != "CANCELLED" and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
    assert slurm_state(evaluate["backend_id"]) == "CANCELLED"  # scancelled, not left pending

    (project / "train.py").write_text(
        "print('train: the data is', open('data.txt').read(), flush=True)\n"
    )
    reply = await api.post(f"jobs/{train['id']}/resume", {"with_changes": True})
    assert reply.status == 201, reply.body
    new_train, new_evaluate = reply.body["jobs"]
    assert new_evaluate["spec"]["after"] == [new_train["id"]]
    script = (partition / ".hyperpod" / "jobs" / new_evaluate["id"] / "job.sbatch").read_text()
    assert f"#SBATCH --dependency=afterok:{new_train['backend_id']}\n" in script
    assert (await until_finished(api, new_train, timeout=90))["state"] == "SUCCEEDED"
    assert (await until_finished(api, new_evaluate, timeout=90))["state"] == "SUCCEEDED"
