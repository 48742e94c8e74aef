"""The test cluster starts whatever Slurm ran on this machine before: its saved state is its own.

slurmctld records its ClusterName in `<StateSaveLocation>/clustername` and refuses to start with
"CLUSTER NAME MISMATCH" when that file names another cluster (Slurm 22.05 `src/slurmctld/
controller.c`, `_create_clustername_file` / the check in `main`). Debian's default
StateSaveLocation is /var/lib/slurm/slurmctld, shared with any other Slurm of the machine.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import CLUSTER_ENV, SCRIPT, cluster, scontrol

SHARED_STATE = Path("/var/lib/slurm/slurmctld")


def config(name: str) -> str:
    for line in scontrol("show", "config").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == name:
            return value.strip()
    raise AssertionError(f"{name} not in scontrol show config")


def sinfo_works() -> None:
    done = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "debug" in done.stdout


@pytest.fixture
def foreign_state() -> Iterator[Path]:
    """Another cluster's `clustername` in Debian's shared StateSaveLocation, restored after."""
    SHARED_STATE.mkdir(parents=True, exist_ok=True)
    marker = SHARED_STATE / "clustername"
    before = marker.read_bytes() if marker.exists() else None
    marker.write_text("someone-elses-slurm\n")
    yield marker
    if before is None:
        marker.unlink(missing_ok=True)
    else:
        marker.write_bytes(before)


def test_starts_after_another_slurm_left_its_clustername(
    slurm_cluster: None, foreign_state: Path
) -> None:
    cluster("stop")
    cluster("start")
    sinfo_works()
    assert config("ClusterName") == "hyperpod-test"
    assert Path(config("StateSaveLocation")) != SHARED_STATE
    # The other Slurm's state is left as it was.
    assert foreign_state.read_text() == "someone-elses-slurm\n"


def test_starts_after_running_under_another_cluster_name(slurm_cluster: None) -> None:
    """A real slurmctld first runs as another cluster in the test cluster's own state directory
    (it writes its clustername there), then the test cluster starts there again."""
    done = subprocess.run(
        ["bash", str(SCRIPT), "start"],
        env={**os.environ, **CLUSTER_ENV, "SLURM_CLUSTER_NAME": "previous-cluster"},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    state = Path(config("StateSaveLocation"))
    assert config("ClusterName") == "previous-cluster"
    assert (state / "clustername").read_text().strip() == "previous-cluster"
    cluster("start")
    sinfo_works()
    assert config("ClusterName") == "hyperpod-test"
    assert (state / "clustername").read_text().strip() == "hyperpod-test"


def test_no_daemon_keeps_the_callers_lock(slurm_cluster: None, tmp_path: Path) -> None:
    """`flock LOCK slurm-test-cluster.sh start` hands its lock's descriptor to the script: the
    daemons it starts (munged, slurmctld, slurmd) must not keep it, or LOCK stays held after the
    run for as long as they live."""
    lock = tmp_path / "lock"
    lock.touch()
    cluster("stop")  # munged too: start starts every daemon again
    done = subprocess.run(
        ["flock", str(lock), "bash", str(SCRIPT), "start"],
        env={**os.environ, **CLUSTER_ENV},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    sinfo_works()
    free = subprocess.run(["flock", "-n", str(lock), "true"], check=False, timeout=10)
    assert free.returncode == 0, "a daemon of the test cluster holds the caller's lock"
