"""HyperPod's own verdict read from a HyperPodPyTorchJob's status (operator_verdict.py), in the
shapes the public sources show: the agent's fault reasons (hyperpod-elastic-agent 1.1.3
set_agent_state_fault: LogHang_/LogSlow_/LogFault_; AWS's training operator guide:
LogStateHanging_) and the Running condition after a restart ("The fault of reason NodeFault was
remediated in 94283 milliseconds.", the guide's `kubectl describe` output). Each status below is
checked against AWS's model of the CRD's status first."""

from __future__ import annotations

from typing import Any

from jupyter_hyperpod.backends.kubernetes.operator_verdict import operator_verdict

from . import official

FAULTY = {
    "restartType": "JLR",
    "faultyPodList": ["hp-hang-pods-1"],
    "faultyRankList": ["1"],
    "faultyInstanceIdList": ["hyperpod-i-0abc"],
}


def status(*conditions: dict[str, Any], restarts: int = 1) -> dict[str, Any]:
    value = {
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "Created",
                "message": "created",
                "lastTransitionTime": "2026-12-02T09:00:00Z",
            },
            *conditions,
        ],
        "restartCount": restarts,
        "latestFaultyPodInstanceList": FAULTY,
    }
    official.hyperpod.HyperPodPytorchJobStatus.model_validate(value, by_name=True)
    return value


def condition(ctype: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


HANG_WORDS = (
    "The job is hanging (not receiving required logs) on the following log monitoring rules "
    "and corresponding last matched log lines: {'JobHang': 'step 4/10 | loss 0.25'}"
)


def test_restarting_then_remediated_keeps_the_agent_words() -> None:
    restarting = operator_verdict(
        status(condition("Restarting", "LogHang_JobHang", HANG_WORDS, "2026-12-02T09:05:00Z")),
        None,
    )
    assert restarting is not None
    assert (restarting.state, restarting.rule, restarting.reason) == (
        "HANGING",
        "JobHang",
        "LogHang_JobHang",
    )
    assert restarting.action == "restarting the job (restart 1)"
    assert restarting.ranks == [1] and restarting.nodes == ["hyperpod-i-0abc"]
    running = operator_verdict(
        status(
            condition(
                "Running",
                "Running",
                "The fault of reason LogHang_JobHang was remediated in 94283 milliseconds.",
                "2026-12-02T09:06:34Z",
            )
        ),
        restarting,
    )
    assert running is not None and running.reason == "LogHang_JobHang"
    assert running.action == "restarted the job (restart 1), running again after 94 s"
    assert running.message == HANG_WORDS  # the Running condition names only the reason


def test_failed_on_a_slow_rule_and_older_wording() -> None:
    failed = operator_verdict(
        status(condition("Failed", "LogSlow_tokens", "slowed", "2026-12-02T09:10:00Z")), None
    )
    assert failed is not None and failed.state == "SLOW" and failed.action == "failed the job"
    older = operator_verdict(
        status(
            condition("Restarting", "LogStateHanging_JobStart", "hanging", "2026-12-02T09:11:00Z")
        ),
        None,
    )
    assert older is not None and (older.state, older.rule) == ("HANGING", "JobStart")


def test_no_verdict_from_other_faults_and_the_last_one_kept() -> None:
    node_fault = status(
        condition(
            "Running",
            "Running",
            "The fault of reason NodeFault was remediated in 94283 milliseconds.",
            "2026-12-02T09:06:34Z",
        )
    )
    assert operator_verdict(node_fault, None) is None
    kept = operator_verdict(
        status(condition("Restarting", "LogHang_JobHang", HANG_WORDS, "2026-12-02T09:05:00Z")),
        None,
    )
    assert operator_verdict(node_fault, kept) == kept
