"""HyperPod's own watchdog verdict on a HyperPodPyTorchJob, read from the job object's status.

The HyperPod elastic agent in each pod evaluates the job's `logMonitoringConfiguration` (sent by
the operator in its start request) and, when a rule fires, reports its agent state FAULTED with
the reason `LogHang_<rule>`, `LogSlow_<rule>` or `LogFault_<rule>` and a message naming the rules
and their last matched lines (PyPI hyperpod-elastic-agent 1.1.3,
`elastic_agent/hyperpod_elastic_agent.py` set_agent_state_fault; AWS's HyperPod training operator
guide calls the first one `LogStateHanging_<rule>`). The operator then restarts the job
(`status.restartCount`, `latestFaultyPodInstanceList`) and, once it runs again, says on its
Running condition "The fault of reason <reason> was remediated in <n> milliseconds." (the same
guide's `kubectl describe hyperpodpytorchjob` output after a NodeFault). A condition that carries
the fault reason itself (Restarting, or Failed when its retries are spent) is read the same way.

The last verdict seen is kept with the job (`KubernetesState.operator_verdict`): the status
keeps only the latest fault, and a later Running condition replaces the Restarting one.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from ...core.models import OperatorVerdict
from .jobs import timestamp

_REASON = re.compile(r"^Log(?:State)?(Hang|Hanging|Slow|Slowed|Fault|Faulted)_(.+)$")
_REMEDIATED = re.compile(
    r"The fault of reason (\S+) was remediated in (\d+) milliseconds", re.IGNORECASE
)
_STATES: dict[str, Literal["HANGING", "SLOW", "FAULTED"]] = {
    "hang": "HANGING",
    "hanging": "HANGING",
    "slow": "SLOW",
    "slowed": "SLOW",
    "fault": "FAULTED",
    "faulted": "FAULTED",
}


def _parse(reason: str) -> tuple[Literal["HANGING", "SLOW", "FAULTED"], str] | None:
    match = _REASON.match(reason.strip())
    if not match:
        return None
    return _STATES[match.group(1).lower()], match.group(2)


def operator_verdict(
    status: dict[str, Any], previous: OperatorVerdict | None
) -> OperatorVerdict | None:
    """The operator's latest log-monitoring verdict in `status` (a HyperPodPyTorchJob's), else
    `previous` (the last one seen)."""
    found: OperatorVerdict | None = None
    restarts = int(status.get("restartCount") or 0)
    faulty = status.get("latestFaultyPodInstanceList") or {}
    ranks = [int(r) for r in faulty.get("faultyRankList") or [] if str(r).isdigit()]
    nodes = [str(n) for n in faulty.get("faultyInstanceIdList") or [] if n]
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        at = timestamp(condition.get("lastTransitionTime"))
        reason = str(condition.get("reason") or "")
        message = condition.get("message")
        parsed = _parse(reason)
        remediated = _REMEDIATED.search(str(message or ""))
        if parsed is None and remediated:
            parsed, reason = _parse(remediated.group(1)), remediated.group(1)
        if parsed is None:
            continue
        state, rule = parsed
        if condition.get("type") in ("Failed", "Error"):
            action = "failed the job"
        elif remediated:
            seconds = int(remediated.group(2)) / 1000
            action = f"restarted the job (restart {restarts}), running again after {seconds:.0f} s"
        else:
            action = f"restarting the job (restart {restarts})"
        if (
            previous is not None
            and previous.reason == reason
            and previous.at is not None
            and at is not None
            and at < previous.at
        ):
            continue  # an older condition than the verdict kept
        candidate = OperatorVerdict(
            state=state,
            rule=rule,
            reason=reason,
            message=None if remediated and reason != condition.get("reason") else message,
            at=at,
            action=action,
            ranks=ranks,
            nodes=nodes,
        )
        if found is None or (candidate.at or 0.0) >= (found.at or 0.0):
            found = candidate
    if found is None:
        return previous
    if previous is not None and found.message is None and previous.reason == found.reason:
        # The Running condition names the reason only: the agent's words were seen before.
        found = found.model_copy(update={"message": previous.message})
    return found
