"""A HyperPodPyTorchJob carries the watchdog as HyperPod's own logMonitoringConfiguration (a hang
rule on the step lines, a slow rule with a capturing group), valid for AWS's model, in the
preview; a PyTorchJob has no such field; a pattern RE2 cannot read is refused naming the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from jupyter_hyperpod.backends.kubernetes.backend import KubernetesOrchestrator
from jupyter_hyperpod.backends.kubernetes.log_monitoring import (
    HANG_PATTERN,
    SLOW_PATTERN,
    anywhere,
)
from jupyter_hyperpod.core.errors import InvalidRequest

from . import official
from .conftest import make_launch, make_settings


@pytest.fixture
def offline(fs_root: Path, tmp_path: Path) -> KubernetesOrchestrator:
    return KubernetesOrchestrator(settings=make_settings(fs_root, tmp_path / "no-kubeconfig"))


def rules_of(offline: KubernetesOrchestrator, fs_root: Path, **fields: object) -> list[dict]:
    launch = make_launch(fs_root, "watched", kind="HyperPodPyTorchJob", nodes=2, **fields)
    manifest = yaml.safe_load(offline.render(launch).text)  # what the preview shows
    official.check_manifest(manifest)  # AWS's LogMonitoringConfiguration (extra="forbid")
    for rule in manifest["spec"]["runPolicy"]["logMonitoringConfiguration"]:
        official.hyperpod.LogMonitoringConfiguration.model_validate(rule, by_name=True)
    return manifest["spec"]["runPolicy"]["logMonitoringConfiguration"]  # type: ignore[no-any-return]


def test_the_hang_and_slow_rules(offline: KubernetesOrchestrator, fs_root: Path) -> None:
    rules = rules_of(
        offline,
        fs_root,
        watchdog={
            "hang_floor_seconds": 120,
            "start_cutoff_seconds": 900,
            "straggler_windows": 4,
            "slow_tokens_per_second": 5000,
        },
    )
    assert rules == [
        {
            "name": "hyperpod-watchdog-hang",
            "logPattern": anywhere(HANG_PATTERN),
            "expectedStartCutOffInSeconds": 900,
            "expectedRecurringFrequencyInSeconds": 120,
        },
        {
            "name": "hyperpod-watchdog-slow",
            "logPattern": SLOW_PATTERN,
            "metricThreshold": 5000,
            "operator": "lt",
            "metricEvaluationDataPoints": 4,
        },
    ]
    from jupyter_hyperpod.training.progress import Progress

    line = Progress(total=100, initial=0, enabled=False).update(
        7, loss=1.0, lr=1e-4, tokens_per_second=812.0
    )
    # The agent matches from the line's start (re.match), behind a rank's prefix too.
    assert re.match(rules[0]["logPattern"], f"[default0]:{line}")
    slow = re.match(SLOW_PATTERN, f"[default0]:{line}")
    assert slow and slow.group(1) == "812" and re.compile(SLOW_PATTERN).groups == 1


def test_admin_defaults_and_the_job_own_pattern(
    offline: KubernetesOrchestrator, fs_root: Path
) -> None:
    (rule,) = rules_of(offline, fs_root)
    settings = offline.settings
    assert rule["expectedRecurringFrequencyInSeconds"] == int(settings.watchdog_hang_floor_seconds)
    assert settings.watchdog_start_cutoff_seconds == 0  # no cut-off unless asked
    assert "expectedStartCutOffInSeconds" not in rule
    (own,) = rules_of(offline, fs_root, watchdog={"step_pattern": r"iter=(?P<step>\d+)"})
    assert own["logPattern"] == r".*(?:iter=(?P<step>\d+))"


def test_no_rules_for_a_pytorchjob_or_when_off(
    offline: KubernetesOrchestrator, fs_root: Path
) -> None:
    launch = make_launch(fs_root, "plain", kind="PyTorchJob", nodes=2)
    manifest = yaml.safe_load(offline.render(launch).text)
    assert "logMonitoringConfiguration" not in manifest["spec"].get("runPolicy", {})
    launch = make_launch(
        fs_root, "off", kind="HyperPodPyTorchJob", nodes=2, watchdog={"enabled": False}
    )
    manifest = yaml.safe_load(offline.render(launch).text)
    assert "logMonitoringConfiguration" not in manifest["spec"]["runPolicy"]


def test_a_pattern_re2_cannot_read(offline: KubernetesOrchestrator, fs_root: Path) -> None:
    launch = make_launch(
        fs_root, "lookbehind", kind="HyperPodPyTorchJob", watchdog={"step_pattern": r"(?<=it)\d+"}
    )
    with pytest.raises(InvalidRequest) as refused:
        offline.render(launch)
    assert refused.value.field == "watchdog.step_pattern" and "RE2" in refused.value.message
