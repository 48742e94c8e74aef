"""`jupyter hyperpod submit` of a script a rank cannot start says what the panel says (the check
is the server's, core/launch.check_program), exits as a refused request, and creates nothing."""

from __future__ import annotations

import json
from pathlib import Path

from ..test_script_checks import NOT_EXECUTABLE
from .conftest import cli


def test_the_cli_refuses_a_directory_and_a_non_executable_program(
    jupyter_env: dict[str, str], partition: Path
) -> None:
    (partition / "tool").write_text("echo hi\n")
    (partition / "project").mkdir()
    refused = cli(jupyter_env, "submit", "tool")
    assert refused.returncode != 0
    assert NOT_EXECUTABLE in refused.stderr, refused.stderr
    folder = cli(jupyter_env, "submit", "project")
    assert folder.returncode != 0
    assert "'project' is a directory: choose the script or program inside it" in folder.stderr
    jobs = json.loads(cli(jupyter_env, "jobs", "--json").stdout)
    assert jobs["total"] == 0


def test_the_cli_runs_a_plain_sh_script_under_bash(
    jupyter_env: dict[str, str], partition: Path
) -> None:
    (partition / "run.sh").write_text('echo "from-$0"\n')  # not executable
    dry = cli(jupyter_env, "submit", "--dry-run", "run.sh")
    assert dry.returncode == 0, dry.stderr
    assert "bash ./run.sh" in dry.stdout
