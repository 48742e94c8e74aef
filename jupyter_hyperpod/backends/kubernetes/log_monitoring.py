"""The watchdog's rules as HyperPod's own: `spec.runPolicy.logMonitoringConfiguration` of a
HyperPodPyTorchJob, so that the training operator sees a hang (and restarts the job as its
runPolicy says) even while no JupyterLab watches.

AWS's model (`hyperpod_pytorch_job_unified_config.LogMonitoringConfiguration`): each rule has a
`name` and a `logPattern` (a regex, "can optionally include one capturing group to extract a
numeric metric value"); `expectedStartCutOffInSeconds` (time to the first match) and
`expectedRecurringFrequencyInSeconds` (time between two matches) make it HANGING; `metricThreshold`
with an `operator` (gt, lt, eq, gteq, lteq) over `metricEvaluationDataPoints` consecutive matches
makes it SLOW. The HyperPod elastic agent in each pod evaluates the rules with Python's
`re.match`, anchored at the line's start (hyperpod-elastic-agent 1.1.3 `logagent/log_agent.py`;
AWS's examples all begin with `.*`): each pattern is sent as `.*(?:pattern)`, so that it matches
anywhere in the line (a rank's prefix, a timestamp) and keeps its first capturing group. Patterns
are kept to RE2's syntax (no look-around, no back-references), which the operator (in Go) reads.
"""

from __future__ import annotations

import re
from typing import Any

from ...core.errors import InvalidRequest
from ...core.watchdog import WatchdogConfig

HANG_PATTERN = r"step [0-9]+ ?/ ?[0-9]+|\| *[0-9]+/[0-9]+ *\["
"""Our training loop's and plain `step N/M` lines, and tqdm's bars (the Trainer's too)."""
SLOW_PATTERN = r".*\| ([0-9]+) tok/s"
"""Our loop's tokens/s (`| 987 tok/s |`). It writes 1,000 and more with a comma, which this does
not match: a rule `lt` a threshold only ever needs the smaller values."""
_NOT_RE2 = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=")


def anywhere(pattern: str) -> str:
    """`pattern` for the agent's `re.match`: found anywhere in the line."""
    return f".*(?:{pattern})"


def log_monitoring_rules(config: WatchdogConfig, *, slow_below: int | None) -> list[dict[str, Any]]:
    """A hang rule on the job's step lines, and a slow rule (tokens/s below `slow_below`)."""
    pattern = config.step_pattern or HANG_PATTERN
    if _NOT_RE2.search(pattern):
        raise InvalidRequest(
            "watchdog.step_pattern: HyperPod's operator reads patterns as RE2, which has no "
            "look-ahead, look-behind or back-references",
            field="watchdog.step_pattern",
        )
    hang: dict[str, Any] = {"name": "hyperpod-watchdog-hang", "logPattern": anywhere(pattern)}
    if config.start_cutoff_seconds > 0:
        hang["expectedStartCutOffInSeconds"] = int(config.start_cutoff_seconds)
    hang["expectedRecurringFrequencyInSeconds"] = int(config.hang_floor_seconds)
    rules: list[dict[str, Any]] = [hang]
    if slow_below:
        rules.append(
            {
                "name": "hyperpod-watchdog-slow",
                "logPattern": SLOW_PATTERN,
                "metricThreshold": int(slow_below),
                "operator": "lt",
                "metricEvaluationDataPoints": int(config.straggler_windows),
            }
        )
    return rules
