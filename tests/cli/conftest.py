"""Fixtures for the magics, the CLI and the client: Jupyter configuration files that point the
core at the same temporary file system as the test server, and a small rank script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

STEPS_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    rank = int(os.environ.get("RANK", "0"))
    steps, pause = int(sys.argv[1]), float(sys.argv[2])
    for step in range(steps):
        print(f"rank {rank} step {step} args {sys.argv[3:]}", flush=True)
        time.sleep(pause)
    sys.exit(int(os.environ.get("EXIT_CODE", "0")))
    """
)


@pytest.fixture
def steps_script(partition: Path) -> Path:
    project = partition / "project"
    project.mkdir(exist_ok=True)
    path = project / "steps.py"
    path.write_text(STEPS_SCRIPT)
    return path


@pytest.fixture
def jupyter_env(
    hyperpod_config: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """An environment whose Jupyter config files hold the test server's HyperPodApp traits, so
    that the core without a server (the CLI, a plain IPython) sees the same cluster."""
    config_dir = tmp_path / "jupyter-config"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "jupyter_server_config.json").write_text(
        json.dumps({"HyperPodApp": hyperpod_config})
    )
    runtime = tmp_path / "jupyter-runtime"
    runtime.mkdir(exist_ok=True)
    env = {
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "JUPYTER_CONFIG_PATH": "",
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
        "JUPYTER_PLATFORM_DIRS": "0",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in (
        "JUPYTER_HYPERPOD_URL",
        "JUPYTER_HYPERPOD_TOKEN",
        "JUPYTER_TOKEN",
        "JPY_PARENT_PID",
        "HYPERPOD_FS_ROOT",
        "MLFLOW_TRACKING_URI",
    ):
        monkeypatch.delenv(key, raising=False)
    return {**os.environ, "PYTHONPATH": str(REPO)}


def cli(
    env: dict[str, str], *args: str, timeout: float = 60, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`jupyter hyperpod ARGS` as a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "jupyter_hyperpod.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or REPO,
    )


@pytest.fixture
def shell(jupyter_env: dict[str, str]) -> Iterator[Any]:
    """A real IPython shell in this process with the extension loaded (no Jupyter server)."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_hyperpod")
    # The shell is this process's one: a session an earlier test gave its magics (`magics.api =`,
    # a server since stopped) would answer this test's magics instead of this test's cluster.
    ip.magics_manager.registry["HyperPodMagics"].close()
    yield ip
    magics = ip.magics_manager.registry.get("HyperPodMagics")
    if magics is not None:
        magics.close()
