"""Fixtures of the queue tests: the real Slurm test cluster with two OS users who submit with
`sbatch` themselves (as on a shared login node), and the Kubernetes double with jobs created
from manifests this extension did not render.

The users are real accounts (useradd): munge signs each request with the caller's uid and
slurmctld accepts any uid the machine knows (no accounting, so no association is required), and
slurmd runs each job as its owner, which writes its output with that owner's permissions.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..slurm.conftest import cluster

ME = "hpq-alice"
OTHER = "hpq-bob"


@dataclass
class SlurmUsers:
    """Two OS users and a directory each for their jobs' outputs."""

    root: Path

    def home(self, user: str, *, private: bool = False) -> Path:
        path = self.root / (f"{user}-private" if private else user)
        if not path.exists():
            path.mkdir()
            info = pwd.getpwnam(user)
            os.chown(path, info.pw_uid, info.pw_gid)
            path.chmod(0o700 if private else 0o755)
        return path

    def sbatch(self, user: str, *args: str, script: str = "sleep 120") -> str:
        """`sbatch --parsable ...` run as `user` (runuser), as that user would in a terminal."""
        done = subprocess.run(
            ["runuser", "-u", user, "--", "sbatch", "--parsable", *args, "--wrap", script],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            cwd=self.home(user),
        )
        assert done.returncode == 0, done.stderr
        slurm_id = done.stdout.strip().split(";")[0]
        SUBMITTED.append(slurm_id)
        return slurm_id


SUBMITTED: list[str] = []


def _ensure_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", name], check=True, timeout=30)


@pytest.fixture(scope="package")
def slurm_users() -> Iterator[SlurmUsers]:
    if os.geteuid() != 0:
        pytest.fail("the Slurm queue tests need root (useradd, slurmctld, slurmd)")
    for name in (ME, OTHER):
        _ensure_user(name)
    cluster("start")
    root = Path(tempfile.mkdtemp(prefix="hpq-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield SlurmUsers(root)
    finally:
        if SUBMITTED:
            subprocess.run(["scancel", *SUBMITTED], capture_output=True, check=False)
        cluster("stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def _cancel_after_each() -> Iterator[None]:
    yield
    if SUBMITTED:
        subprocess.run(["scancel", *SUBMITTED], capture_output=True, check=False)
        SUBMITTED.clear()


FIGURES: dict[str, dict[str, int]] = {}
"""Who is who (test_identity_matrix.py): counts per case, printed after the run."""


def add(case: str, name: str, amount: int = 1) -> None:
    FIGURES.setdefault(case, {})
    FIGURES[case][name] = FIGURES[case].get(name, 0) + amount


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("identity (mine, adopt, others' logs): figures")
    for case, figures in FIGURES.items():
        shown = ", ".join(f"{name}: {value}" for name, value in figures.items())
        terminalreporter.write_line(f"{case}: {shown}")
