"""`python -m jupyter_hyperpod.admin partitions` (the CLI's `admin partitions`) as a real process,
against moto and the user-profile double over HTTP, on a real directory tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .test_partitions import cluster, owner_mode  # noqa: F401 - the fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")


def admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jupyter_hyperpod.admin", "partitions", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


def test_list_dry_run_create_repair(cluster: dict[str, Any]) -> None:  # noqa: F811
    root: Path = cluster["root"]
    where = ["--root", str(root), "--domain-id", cluster["domain"]]
    listed = admin("list", *where, "--json")
    assert listed.returncode == 1, listed.stderr  # problems found
    report = json.loads(listed.stdout)
    assert report["fsx_id"] == cluster["fsx_id"]
    assert {p["user"]: p["ok"] for p in report["partitions"]} == {
        "alice": True,
        "bob": False,
        "carol": False,
        "dave": False,
    }

    dry = admin("repair", *where, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "repair: 7 step(s) would run:" in dry.stdout
    assert f"  mkdir -m 0700 {root / 'bob'}" in dry.stdout
    assert f"  chmod 0700 {root / 'carol'}" in dry.stdout
    assert "aws sagemaker update-user-profile" in dry.stdout
    assert not (root / "bob").exists() and owner_mode(root / "carol") == (1000, 100, 0o755)

    done = admin("repair", *where)
    assert done.returncode == 0, done.stderr
    assert "repair: 7 step(s) ran:" in done.stdout
    assert owner_mode(root / "bob") == (200001, 1001, 0o700)
    assert owner_mode(root / "carol") == (200001, 1001, 0o700)
    again = admin("list", *where)
    assert again.returncode == 0 and again.stdout.count(" ok") == 4, again.stdout
    assert admin("create", *where).stdout.rstrip().endswith("create: 0 step(s) ran")


def test_errors_have_exit_codes(cluster: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    gone = admin("list", "--root", str(cluster["root"]), "--domain-id", "d-000000000000")
    assert gone.returncode == 3 and "error:" in gone.stderr
    missing = admin("list", "--root", str(tmp_path / "nowhere"), "--domain-id", cluster["domain"])
    assert missing.returncode == 3 and "is not a directory" in missing.stderr
    bad = admin("create", "--root", str(cluster["root"]), "--user", "../x")
    assert bad.returncode == 2


def test_the_jupyter_hyperpod_admin_verb(cluster: dict[str, Any]) -> None:  # noqa: F811
    """The same tool as `jupyter hyperpod admin partitions` (the CLI's verb table; no server)."""
    root: Path = cluster["root"]
    where = ["--root", str(root), "--domain-id", cluster["domain"]]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jupyter_hyperpod.cli", "admin", "partitions", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": os.getcwd(), "JUPYTER_HYPERPOD_URL": ""},
        )

    listed = cli("list", *where, "--json")
    assert listed.returncode == 1, listed.stderr
    assert {p["user"] for p in json.loads(listed.stdout)["partitions"]} == {
        "alice",
        "bob",
        "carol",
        "dave",
    }
    created = cli("create", *where)
    assert created.returncode == 0, created.stderr
    assert "create: 5 step(s) ran:" in created.stdout
    assert owner_mode(root / "bob") == (200001, 1001, 0o700)
    gone = cli("list", "--root", str(root), "--domain-id", "d-000000000000")
    assert gone.returncode == 3 and gone.stderr.startswith("error:")


def test_help_names_studios_documented_user_and_the_remapped_default() -> None:
    """`--help` says what AWS documents: sagemaker-user is 1000:100 in the space's container and
    is remapped on the instance (AWS's example: 200001), the owner the file system records."""
    shown = admin("--help")
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "default 200001: Studio's sagemaker-user, uid 1000 in the space's container" in text
    assert "default 1001; gid 100 in the container" in text
    assert "CustomPosixUserConfig wins" in text
