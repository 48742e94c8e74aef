"""The tracker's refresh asks squeue for this user's jobs alone (`squeue -u`), on the real test
cluster with two real accounts: squeue given several `-j` ids loads every job the controller
holds, given one user only that user's (Slurm's src/squeue/opts.c, squeue.c). The answers must
be the same as before: a job squeue no longer lists for us is asked of scontrol, whoever owns it.
"""

from __future__ import annotations

import pwd
import subprocess
import time
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator, squeue_user
from jupyter_hyperpod.backends.slurm.state import SlurmState
from jupyter_hyperpod.core.backend import StoredJob
from jupyter_hyperpod.core.identity import Identity, own_account
from jupyter_hyperpod.core.models import JobSpec, JobState
from jupyter_hyperpod.core.settings import HyperPodSettings

from .conftest import ME, OTHER, SlurmUsers

pytestmark = pytest.mark.slurm

NO_ACCOUNT_UID = 45999
"""A uid with no account on this machine (a Studio uid the login node's passwd lacks)."""


def identity(login: str, uid: int) -> Identity:
    return Identity(name=login, uid=uid, login=login, reader=own_account(), source="settings")


def backend_for(who: Identity, tmp_path: Path) -> SlurmOrchestrator:
    settings = HyperPodSettings(shared_fs_root=str(tmp_path), user=who.name)
    backend = SlurmOrchestrator(settings=settings, identity=who, standby_seconds=0)
    backend.slurm_config()  # the controller known: a refresh is then its own commands alone
    return backend


def tracked(slurm_id: str) -> StoredJob:
    return StoredJob(
        id=f"job-{slurm_id}",
        spec=JobSpec(name="job", command=["true"], launcher="plain"),
        state=JobState.PENDING,
        backend_id=slurm_id,
        created=time.time(),
        started=None,
        data=SlurmState(slurm_id=slurm_id),
    )


def ended(slurm_id: str) -> bool:
    return (
        subprocess.run(
            ["squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%T"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        == "COMPLETED"
    )


def wait_ended(slurm_id: str) -> None:
    deadline = time.monotonic() + 60
    while not ended(slurm_id):
        assert time.monotonic() < deadline, f"Slurm job {slurm_id} did not complete"
        time.sleep(0.3)


def test_squeue_names_the_user_only_where_it_can() -> None:
    assert squeue_user(identity("root", 0)) == ["-u", "root"]
    assert squeue_user(identity("root", 1)) == []  # that name is another uid's here
    assert squeue_user(identity(str(NO_ACCOUNT_UID), NO_ACCOUNT_UID)) == []


def test_a_refresh_asks_for_this_users_jobs_and_scontrol_for_any_other(
    slurm_users: SlurmUsers, tmp_path: Path
) -> None:
    alice = identity(ME, pwd.getpwnam(ME).pw_uid)
    done = slurm_users.sbatch(ME, "-J", "alice-done", script="true")
    held = slurm_users.sbatch(ME, "-J", "alice-held", "--hold")
    # A job of another uid in this server's store (one written by a server that ran as bob):
    # squeue -u leaves it out, and scontrol still tells its state.
    bobs = slurm_users.sbatch(OTHER, "-J", "bob-held", "--hold")
    wait_ended(done)
    backend = backend_for(alice, tmp_path)
    backend.commands.history.clear()

    updates = backend.refresh([tracked(done), tracked(held), tracked(bobs)])

    squeue = backend.commands.history[0]
    assert squeue[0] == "squeue" and squeue[squeue.index("-u") + 1] == ME
    asked = [call[-1] for call in backend.commands.history[1:] if call[0] == "scontrol"]
    assert sorted(asked) == sorted([done, bobs])  # the ended one, and the one squeue left out
    assert updates[f"job-{done}"].state == JobState.SUCCEEDED
    assert updates[f"job-{done}"].exit_code == 0
    assert updates[f"job-{held}"].state == JobState.PENDING
    assert updates[f"job-{bobs}"].state == JobState.PENDING
    assert updates[f"job-{held}"].data.slurm_reason == "JobHeldUser"  # type: ignore[union-attr]
    assert updates[f"job-{bobs}"].data.slurm_reason == "JobHeldUser"  # type: ignore[union-attr]


def test_a_uid_without_an_account_here_is_refreshed_from_every_job(
    slurm_users: SlurmUsers, tmp_path: Path
) -> None:
    """squeue would answer "Invalid user" for a uid this machine cannot name, and list nothing:
    no `-u` then, and the same answer as before."""
    held = slurm_users.sbatch(ME, "-J", "alice-held", "--hold")
    also = slurm_users.sbatch(ME, "-J", "alice-held-2", "--hold")
    backend = backend_for(identity(str(NO_ACCOUNT_UID), NO_ACCOUNT_UID), tmp_path)
    backend.commands.history.clear()

    updates = backend.refresh([tracked(held), tracked(also)])

    assert [call[0] for call in backend.commands.history] == ["squeue"]
    assert "-u" not in backend.commands.history[0]
    assert {updates[f"job-{i}"].state for i in (held, also)} == {JobState.PENDING}
