"""With slurmdbd accounting on, a job the controller no longer holds is finished from `sacct`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
from jupyter_hyperpod.core.models import JobSpec, JobState
from jupyter_hyperpod.core.settings import HyperPodSettings

from .conftest import CLUSTER_ENV, cluster, submit, wait_state

pytestmark = pytest.mark.slurm


def start_with(**env: str) -> None:
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        cluster("start")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def accounting_cluster(slurm_cluster: None) -> Iterator[None]:
    """The test cluster with MariaDB + slurmdbd; the plain cluster again afterwards."""
    start_with(SLURM_DBD="1")
    try:
        yield
    finally:
        cluster("start")  # CLUSTER_ENV without SLURM_DBD: back to accounting_storage/none
        assert "SLURM_DBD" not in CLUSTER_ENV


def test_job_forgotten_by_the_controller_ends_from_sacct(
    accounting_cluster: None, settings: HyperPodSettings, partition: Path
) -> None:
    backend = SlurmOrchestrator(settings=settings)
    assert backend.details()["accounting"] is True
    (partition / "fail.sh").write_text("#!/bin/sh\necho about to fail\nexit 4\n")
    (partition / "fail.sh").chmod(0o755)
    tracked = submit(
        backend, settings, JobSpec(name="acct", command=["./fail.sh"], launcher="plain")
    )
    wait_state(backend, tracked, {JobState.RUNNING, JobState.FAILED})

    # A clean restart (another MinJobAge): slurmctld forgets every job, slurmdbd keeps them.
    start_with(SLURM_DBD="1", MIN_JOB_AGE="299")
    tracked.job.state = JobState.RUNNING
    backend = SlurmOrchestrator(settings=settings)
    backend.slurm_config()
    backend.commands.history.clear()
    update = backend.refresh([tracked.job])[tracked.job.id]

    assert [call[0] for call in backend.commands.history] == ["squeue", "sacct"]
    assert (update.state, update.exit_code) == (JobState.FAILED, 4)
    assert update.started is not None and update.ended is not None
    assert "no longer knows" not in (update.state_reason or "")
