"""doctor's JupyterLab check: the installed JupyterLab against the range the built panel asks for
(`package.json` `dependencies`, as JupyterLab's own `labextension list` compares them)."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
from packaging.version import Version
from traitlets.config import Config

from jupyter_hyperpod.core.labcompat import caret_allows, check_jupyterlab
from jupyter_hyperpod.core.settings import HyperPodSettings
from jupyter_hyperpod.doctor import diagnose

ROOT = Path(__file__).resolve().parent.parent


def _panel(tmp_path: Path, spec: str) -> Path:
    package = tmp_path / "labextensions" / "jupyter-hyperpod" / "package.json"
    package.parent.mkdir(parents=True)
    package.write_text(
        json.dumps(
            {
                "name": "jupyter-hyperpod",
                "version": "0.1.0",
                "dependencies": {"@jupyterlab/application": spec},
            }
        )
    )
    return package


def test_the_floor_is_the_source_range() -> None:
    """The range the check compares is the one package.json builds with (one truth)."""
    spec = json.loads((ROOT / "package.json").read_text())["dependencies"][
        "@jupyterlab/application"
    ]
    assert spec == "^4.0.0"
    assert caret_allows(spec, Version("4.0.7"))  # SageMaker Distribution 1.0
    assert caret_allows(spec, Version("4.5.10"))  # SageMaker Distribution 4.4
    assert not caret_allows(spec, Version("3.6.7"))  # SageMaker Distribution 0.13
    assert not caret_allows(spec, Version("5.0.0"))
    assert not caret_allows(spec, Version("4.0.0rc1"))


@pytest.mark.parametrize("version", ["4.0.7", "4.3.8", "4.6.6"])
def test_a_jupyterlab_in_range_passes(tmp_path: Path, version: str) -> None:
    package = _panel(tmp_path, "^4.0.0")
    result = check_jupyterlab(lambda: version, lambda: [package])
    assert result.status == "pass", result
    assert f"JupyterLab {version}" in result.detail and "^4.0.0" in result.detail


@pytest.mark.parametrize("version", ["3.6.7", "5.0.0"])
def test_a_jupyterlab_out_of_range_fails_with_the_fix(tmp_path: Path, version: str) -> None:
    package = _panel(tmp_path, "^4.0.0")
    result = check_jupyterlab(lambda: version, lambda: [package])
    assert result.status == "fail"
    assert f"JupyterLab {version} is outside the panel's range" in result.detail
    assert "jupyterlab>=4.0,<5" in result.fix


def test_the_first_installed_panel_wins(tmp_path: Path) -> None:
    """As JupyterLab reads the data paths: a stale copy first is the one that is loaded."""
    stale = _panel(tmp_path / "user", "^4.6.0")
    fresh = _panel(tmp_path / "env", "^4.0.0")
    result = check_jupyterlab(lambda: "4.4.10", lambda: [tmp_path / "none.json", stale, fresh])
    assert result.status == "fail" and "^4.6.0" in result.detail


def test_no_jupyterlab_or_no_panel_is_a_warning(tmp_path: Path) -> None:
    package = _panel(tmp_path, "^4.0.0")
    none = check_jupyterlab(lambda: None, lambda: [package])
    assert none.status == "warn" and "no JupyterLab installed" in none.detail and none.fix
    missing = check_jupyterlab(lambda: "4.6.6", lambda: [tmp_path / "absent.json"])
    assert missing.status == "warn" and "is not installed" in missing.detail and missing.fix


def test_doctor_reports_the_jupyterlab_of_this_environment(tmp_path: Path, fs_root: Path) -> None:
    """The real check in the real diagnosis: this environment's JupyterLab and its panel."""
    config = Config()
    config.HyperPodSettings.orchestrator = "local"
    config.HyperPodSettings.shared_fs_root = str(fs_root)
    config.HyperPodSettings.job_store = str(tmp_path / "jobs.sqlite")
    report = diagnose(HyperPodSettings(config=config))
    check = report["JupyterLab"]
    installed = importlib.metadata.version("jupyterlab")
    assert f"JupyterLab {installed}" in check.detail, check
    assert check.status == "pass", check  # the test extra installs JupyterLab 4.6+
