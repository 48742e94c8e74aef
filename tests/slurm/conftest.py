"""The real Slurm cluster these tests run against, started once by the project's script.

`scripts/slurm-test-cluster.sh` starts slurmctld and 4 slurmd (node1..node4, 4 fake GPUs and 4 CPUs
each) on this machine; it installs Debian's slurm-wlm and munge when they are missing. The cluster
is stopped after the last test of this directory, so that other suites' `orchestrator = auto`
never find it. The shared file system is the test's temporary directory: slurmd runs here, jobs
see the same paths.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
from jupyter_hyperpod.core.backend import JobUpdate, Launch, StoredJob
from jupyter_hyperpod.core.errors import BackendUnavailable
from jupyter_hyperpod.core.models import JobSpec, JobState
from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.core.state import BackendState

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm-test-cluster.sh"
CLUSTER_ENV = {
    "SLURM_NODES": "4",
    "GPUS_PER_NODE": "4",
    "CPUS_PER_NODE": "4",
    "MIN_JOB_AGE": "300",
    "NODE_FEATURES": "ml.g5.12xlarge",  # as HyperPod nodes may show their instance type
}


def cluster(command: str, timeout: float = 180) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPT), command],
        env={**os.environ, **CLUSTER_ENV},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"slurm-test-cluster.sh {command} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def scontrol(*args: str) -> str:
    return subprocess.run(
        ["scontrol", *args], capture_output=True, text=True, timeout=30, check=True
    ).stdout


@pytest.fixture(scope="package")
def slurm_cluster() -> Iterator[None]:
    """Up for this directory's tests only: `orchestrator = auto` elsewhere must not find it."""
    if os.geteuid() != 0:
        pytest.fail("the Slurm test cluster needs root (it starts slurmctld and slurmd here)")
    cluster("start")
    try:
        yield
    finally:
        cluster("stop")


@pytest.fixture
def controller_outage(slurm_cluster: None) -> Iterator[Any]:
    """stop() and start() slurmctld; it is always running again after the test."""

    class Outage:
        def stop(self) -> None:
            cluster("stop-controller")

        def start(self) -> None:
            cluster("start-controller")

    try:
        yield Outage()
    finally:
        cluster("start-controller")


@pytest.fixture
def settings(fs_root: Path, tmp_path: Path, partition: Path) -> HyperPodSettings:
    return HyperPodSettings(
        orchestrator="slurm",
        shared_fs_root=str(fs_root),
        partition="shared",
        user="alice",
        job_store=str(tmp_path / "jobs.sqlite"),
    )


SUBMITTED: list[str] = []
"""Slurm ids of the jobs a test submitted through the backend (cancelled after the test)."""


@pytest.fixture(autouse=True)
def cancel_leftovers() -> Iterator[None]:
    """Leave the cluster empty for the next test."""
    yield
    if SUBMITTED:
        subprocess.run(["scancel", *SUBMITTED], capture_output=True, check=False)
        SUBMITTED.clear()


@pytest.fixture
def backend(slurm_cluster: None, settings: HyperPodSettings) -> Iterator[SlurmOrchestrator]:
    # Every listing asks sinfo (the tests change node states and look at once).
    orchestrator = SlurmOrchestrator(settings=settings, node_cache_seconds=0)
    yield orchestrator
    orchestrator.close()


def facts(data: Any) -> dict[str, Any]:
    """What a JobUpdate's data sets, as the store merges it: a typed partial state's own facts
    (`BackendState.changes()`: not its unset defaults), or a plain dict."""
    if isinstance(data, BackendState):
        return data.changes()
    return dict(data or {})


class Tracked:
    """A job as the service would keep it: the stored fields plus the updates applied to them."""

    def __init__(self, spec: JobSpec, update: JobUpdate, job_id: str) -> None:
        self.job = StoredJob(
            id=job_id,
            spec=spec,
            state=update.state or JobState.PENDING,
            backend_id=update.backend_id,
            created=time.time(),
            started=None,
            data=facts(update.data),
        )
        self.exit_code: int | None = None
        self.ended: float | None = None
        self.reason: str | None = None
        self.ranks = update.ranks

    def apply(self, update: JobUpdate | None) -> None:
        if update is None:
            return
        if update.state is not None:
            self.job.state = update.state
        if update.started is not None:
            self.job.started = update.started
        self.job.data.update(facts(update.data))
        self.exit_code = update.exit_code if update.exit_code is not None else self.exit_code
        self.ended = update.ended or self.ended
        self.reason = update.state_reason or self.reason
        self.ranks = update.ranks or self.ranks
        if update.events is not None:  # the job's events as a whole, as the store keeps them
            self.job.events = list(update.events)


def launch_for(settings: HyperPodSettings, spec: JobSpec, job_id: str) -> Launch:
    root = Path(settings.shared_fs_root) / "shared"
    job_dir = root / ".hyperpod" / "jobs" / job_id
    workdir = root / spec.workdir
    return Launch(
        job_id=job_id,
        spec=spec,
        user=settings.user,
        command=list(spec.command),
        workdir=str(workdir),
        job_dir=str(job_dir),
        job_dir_local=job_dir,
        env={**spec.env, "HYPERPOD_JOB_ID": job_id, "HYPERPOD_JOB_DIR": str(job_dir)},
    )


def submit(backend: SlurmOrchestrator, settings: HyperPodSettings, spec: JobSpec) -> Tracked:
    job_id = f"{spec.name}-{time.monotonic_ns() % 1_000_000:06d}"
    update = backend.submit(launch_for(settings, spec, job_id))
    SUBMITTED.append(update.backend_id or "")
    return Tracked(spec, update, job_id)


def wait_state(
    backend: SlurmOrchestrator,
    tracked: Tracked | list[Tracked],
    states: set[JobState],
    timeout: float = 60,
    *,
    through_outage: bool = False,
) -> None:
    """Poll like the service does (one batched refresh for all) until every job is in `states`."""
    jobs = tracked if isinstance(tracked, list) else [tracked]
    deadline = time.monotonic() + timeout
    while True:
        pending = [t for t in jobs if t.job.state not in states]
        if not pending:
            return
        try:
            updates = backend.refresh([t.job for t in pending])
        except BackendUnavailable:
            if not through_outage or time.monotonic() > deadline:
                raise
            updates = {}  # slurmctld still settling after a restart
        for t in pending:
            t.apply(updates.get(t.job.id))
        if time.monotonic() > deadline:
            raise AssertionError(f"jobs still {[t.job.state for t in pending]} after {timeout}s")
        time.sleep(0.3)


@pytest.fixture
def project(partition: Path) -> Path:
    path = partition / "project"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def hyperpod_config(
    slurm_cluster: None, fs_root: Path, tmp_path: Path, partition: Path
) -> dict[str, Any]:
    """The REST tests' server drives the test cluster (started before the server)."""
    return {
        "orchestrator": "slurm",
        "shared_fs_root": str(fs_root),
        "partition": "shared",
        "user": "alice",
        "job_store": str(tmp_path / "jobs.sqlite"),
        "refresh_interval": 0.3,
        "heartbeat_interval": 1.0,
    }


LOGIN_FIGURES: dict[str, Any] = {}
"""What the login-node tests measured (test_login_node.py), printed after the run."""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if LOGIN_FIGURES:
        terminalreporter.section("Slurm login node (connect --slurm): figures")
        terminalreporter.write_line(", ".join(f"{k}: {v}" for k, v in LOGIN_FIGURES.items()))
