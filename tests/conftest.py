"""Shared fixtures: a real Jupyter server (pytest-jupyter) with the extension on a temp file system.

Sub-directories (slurm/, kubernetes/, training/, cli/...) override `hyperpod_config` to point the
same server at their backend.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from .helpers import Api

pytest_plugins = ["pytest_jupyter.jupyter_server"]

# scripts/test.sh (and so CI) sets this: a test module skipped while it is collected (a missing
# extra behind `pytest.importorskip`) fails the run instead of quietly dropping its tests.
STRICT_COLLECTION = os.environ.get("HYPERPOD_STRICT_COLLECTION") == "1"
_skipped_modules: list[str] = []


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if STRICT_COLLECTION and report.skipped:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        _skipped_modules.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped_modules:
        lines = "\n  ".join(_skipped_modules)
        print(f"\n!! test modules skipped at collection (install the extras):\n  {lines}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """What each rerun test failed on first (`--reruns 1` in scripts/test.sh): the summary's R
    says only that it was rerun, and a flaky test is only mended by its error."""
    reruns = terminalreporter.stats.get("rerun", [])
    if reruns:
        terminalreporter.section("reruns: what the first attempt failed on")
        for report in reruns:
            terminalreporter.line(f"{report.nodeid} ({report.when}):")
            terminalreporter.line(report.longreprtext[-3000:])


# scripts/test.sh runs the suite in two processes (pytest-xdist): each directory of tests is one
# unit of work that one process runs from start to end (`DirectoryScheduling`), so that a
# directory's package fixtures (the Slurm test cluster, the Kubernetes doubles, Prometheus, moto)
# start once and two processes never drive one of them; each top-level file is a unit of its
# own. tests/queue drives the Slurm test cluster that tests/slurm starts and stops: one unit.
# The longest units go first (pytest --durations), so that none is left to run alone at the end.
SHARED_UNITS = {"queue": "slurm"}
LONGEST_FIRST = ["training", "kubernetes", "security", "slurm", "cli", "test_package", "gpu"]


def unit_of(nodeid: str) -> str:
    """The unit of work of a test: its directory under tests/, or its file's name."""
    parts = nodeid.split("::", 1)[0].split("/")
    unit = parts[1] if len(parts) > 2 else parts[-1].removesuffix(".py")
    return SHARED_UNITS.get(unit, unit)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {unit: index for index, unit in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(unit_of(item.nodeid), len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class DirectoryScheduling(LoadScopeScheduling):
        """xdist's loadscope with a directory (`unit_of`) as the scope."""

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return DirectoryScheduling(config, log)


USER = "alice"


@pytest.fixture
def fs_root(tmp_path: Path) -> Path:
    root = tmp_path / "fsx"
    root.mkdir()
    return root


@pytest.fixture
def partition(fs_root: Path) -> Path:
    path = fs_root / "shared"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def hyperpod_config(fs_root: Path, tmp_path: Path, partition: Path) -> dict[str, Any]:
    """The HyperPodApp traits for the test server; override in a sub-directory's conftest."""
    return {
        "orchestrator": "local",
        "shared_fs_root": str(fs_root),
        "partition": "shared",
        "user": USER,
        "job_store": str(tmp_path / "jobs.sqlite"),
        "refresh_interval": 0.2,
        "heartbeat_interval": 1.0,
        "local_max_parallel_jobs": 2,
    }


@pytest.fixture
def jp_server_config(hyperpod_config: dict[str, Any]) -> Config:
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyter_hyperpod": True}},
            "HyperPodApp": hyperpod_config,
        }
    )


@pytest.fixture
def api(jp_fetch: Any, jp_ws_fetch: Any) -> Api:
    return Api(jp_fetch, jp_ws_fetch)
