"""The HyperPod elastic agent's log monitoring, as the operator double runs it on each pod's log
(test code only: the real agent cannot be installed beside our torch, see hyperpodrun_shim.py).

It follows PyPI hyperpod-elastic-agent 1.1.3 `logagent/log_agent.py` (LogEvaluator.evaluate):
each rule is matched against every line from its start (`re.match`); `faultOnMatch` faults on a
match; `stopPattern` deactivates the rule; no match within `expectedStartCutOffInSeconds` of the
start, or none for `expectedRecurringFrequencyInSeconds` after the last one, is HANGING; a
captured number compared with `metricThreshold` by `operator` (gt, lt, eq, gteq, lteq) for
`metricEvaluationDataPoints` (default 1) matches in a row is SLOW. The agent then reports FAULTED
with the reason and message of `elastic_agent/hyperpod_elastic_agent.py` set_agent_state_fault
(`LogHang_<rule>`, `LogSlow_<rule>`, `LogFault_<rule>`), which `fault` returns.
"""

from __future__ import annotations

import re
import time
from typing import Any

HEALTHY, HANGING, SLOW, FAULTED = "HEALTHY", "HANGING", "SLOW", "FAULTED"


class Rule:
    def __init__(self, rule: dict[str, Any], now: float) -> None:
        self.name = str(rule["name"])
        self.pattern = re.compile(rule["logPattern"])
        self.start_cutoff = rule.get("expectedStartCutOffInSeconds")
        self.recurring = rule.get("expectedRecurringFrequencyInSeconds")
        self.stop = re.compile(rule["stopPattern"]) if rule.get("stopPattern") else None
        self.threshold = rule.get("metricThreshold")
        self.operator = rule.get("operator")
        self.points = int(rule.get("metricEvaluationDataPoints") or 1)
        self.fault_on_match = bool(rule.get("faultOnMatch"))
        self.active = True
        self.started = now
        self.last_line: str | None = None
        self.last_match: float | None = None
        self.slow = 0
        self.state = "WAITING"

    def evaluate(self, line: str | None, now: float) -> str:
        if not self.active:
            self.state = HEALTHY
            return self.state
        match = self.pattern.match(line) if line is not None else None
        if match:
            self.last_line, self.last_match = line, now
            if self.fault_on_match:
                self.state = FAULTED
                return self.state
        if line is not None and self.stop and self.stop.match(line):
            self.active = False
            self.state = HEALTHY
            return self.state
        if (
            self.start_cutoff is not None
            and self.last_match is None
            and now - self.started > int(self.start_cutoff)
        ):
            self.state = HANGING
            return self.state
        if (
            self.recurring is not None
            and self.last_match is not None
            and now - self.last_match > int(self.recurring)
        ):
            self.state = HANGING
            return self.state
        if match is None:
            return self.state
        if not match.groups() or self.threshold is None or self.operator is None:
            self.state = HEALTHY
            return self.state
        value, limit = float(match.group(1)), int(self.threshold)
        crossed = {
            "gt": value > limit,
            "lt": value < limit,
            "eq": value == limit,
            "gteq": value >= limit,
            "lteq": value <= limit,
        }[self.operator]
        self.slow = min(self.slow + 1, self.points) if crossed else 0
        self.state = SLOW if self.slow >= self.points else HEALTHY
        return self.state


class PodLogMonitor:
    """The rules of one pod's agent over that pod's log, fed as it grows."""

    def __init__(self, rules: list[dict[str, Any]], now: float | None = None) -> None:
        start = time.time() if now is None else now
        self.rules = [Rule(rule, start) for rule in rules]
        self.offset = 0
        self.partial = b""

    def feed(self, data: bytes, now: float | None = None) -> None:
        at = time.time() if now is None else now
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for raw in lines:
            line = raw.decode(errors="replace").rstrip("\r")
            for rule in self.rules:
                rule.evaluate(line, at)
        for rule in self.rules:  # the agent's read loop evaluates on its interval, lines or not
            rule.evaluate(None, at)

    def fault(self) -> tuple[str, str] | None:
        """(reason, message) once a rule fired, as the agent reports them; None while healthy.
        The first fired rule names the reason; the message names every fired one and its last
        matched line (the agent's `rule_name_log_line`)."""
        for state, prefix, words in (
            (HANGING, "LogHang", "is hanging (not receiving required logs)"),
            (SLOW, "LogSlow", "is slowed (logs outside of acceptable thresholds)"),
            (FAULTED, "LogFault", "detected a fault indicating log message"),
        ):
            fired = {rule.name: rule.last_line for rule in self.rules if rule.state == state}
            if fired:
                lines = (
                    "corresponding last matched log lines"
                    if state == HANGING
                    else ("corresponding log lines")
                )
                return (
                    f"{prefix}_{next(iter(fired))}",
                    f"The job {words} on the following log monitoring rules and {lines}: {fired}",
                )
        return None
