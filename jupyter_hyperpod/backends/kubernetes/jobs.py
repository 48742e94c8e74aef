"""Job status from the job object's conditions, its worker pods and the recent warning events."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ...core.backend import JobUpdate
from ...core.models import JobState, RankFault, RankInfo
from .manifest import HPJOB_LABEL, JOB_ID_LABEL, KUBEFLOW_INDEX_LABEL, KUBEFLOW_JOB_LABEL
from .state import KubernetesState

# Waiting reasons that keep a job pending for ever unless a person acts.
STUCK_REASONS = {
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
    "RunContainerError",
}
_TRAILING_INT = re.compile(r"-(\d+)$")


def timestamp(value: Any) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def job_name_of_pod(pod: dict[str, Any]) -> str | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(JOB_ID_LABEL) or labels.get(KUBEFLOW_JOB_LABEL) or labels.get(HPJOB_LABEL)


def rank_of_pod(pod: dict[str, Any]) -> int | None:
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    for key in (
        KUBEFLOW_INDEX_LABEL,
        "replica-index",
        "sagemaker.amazonaws.com/replica-index",
        # An Indexed Job's pod (a TrainJob's JobSet: one per node, trainjob.py).
        "batch.kubernetes.io/job-completion-index",
    ):
        if str(labels.get(key, "")).isdigit():
            return int(labels[key])
    match = _TRAILING_INT.search(metadata.get("name", ""))
    return int(match.group(1)) if match else None


def main_container_status(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == "pytorch":
            return status
    return statuses[0] if statuses else {}


def pod_problem(pod: dict[str, Any]) -> str | None:
    """Why a pod does not run, in a person's words (image pull, unschedulable, crash)."""
    status = pod.get("status") or {}
    container = main_container_status(pod)
    waiting = (container.get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in STUCK_REASONS:
        return f"{waiting['reason']}: {waiting.get('message') or ''}".strip().rstrip(":")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"{condition.get('reason') or 'Unschedulable'}: {condition.get('message') or ''}".strip().rstrip(
                ":"
            )
    return None


def pod_rank_info(pod: dict[str, Any], rank: int) -> RankInfo:
    status = pod.get("status") or {}
    container = main_container_status(pod)
    state = container.get("state") or {}
    terminated = state.get("terminated") or {}
    waiting = state.get("waiting") or {}
    phase = status.get("phase") or "Pending"
    if waiting.get("reason"):
        shown = f"{phase}: {waiting['reason']}"
    elif terminated.get("reason") and phase not in ("Succeeded",):
        shown = f"{phase}: {terminated['reason']}"
    else:
        shown = phase
    return RankInfo(
        rank=rank,
        node=(pod.get("spec") or {}).get("nodeName"),
        state=shown,
        exit_code=terminated.get("exitCode") if terminated else None,
        restarts=int(container.get("restartCount") or 0),
        # The kubelet's time for the container's end (ContainerStateTerminated.finishedAt).
        ended=timestamp(terminated.get("finishedAt")) if terminated else None,
    )


def record_faults(
    status: dict[str, Any], history: list[dict[str, Any]], failed: bool
) -> list[dict[str, Any]]:
    """HyperPod's fault history of a job, from what its status says now and what was seen before.

    The HyperPodPyTorchJob status keeps only the latest faults (`latestFaultyPodInstanceList`:
    restartType, faultyPodList, faultyRankList, faultyInstanceIdList) and the restart count
    (`restartCount`) (AWS's CRD, sagemaker-hyperpod `hyperpod_pytorch_job_unified_config.py`
    FaultyPodInstanceList, HyperPodPytorchJobStatus). So each refresh keeps what it saw: the list
    seen first at restart count n is the fault that caused restart n; once the job failed, the
    latest list is the fault it failed on (restart None). Restarts between two refreshes are
    counted but their faults are not known. AWS does not document whether the list is cleared
    after a restart; either way each restart is recorded once."""
    latest = status.get("latestFaultyPodInstanceList") or {}
    count = int(status.get("restartCount") or 0)
    recorded = list(history)
    seen = {entry.get("restart") for entry in recorded}
    if not latest.get("faultyRankList") and not latest.get("faultyPodList"):
        return recorded
    entry = {
        "restart_type": latest.get("restartType"),
        "ranks": [str(rank) for rank in latest.get("faultyRankList") or []],
        "pods": list(latest.get("faultyPodList") or []),
        "nodes": list(latest.get("faultyInstanceIdList") or []),
    }
    if failed:
        if None not in seen:
            recorded.append({"restart": None, **entry})
    elif count > 0 and count not in seen:
        recorded.append({"restart": count, **entry})
    return recorded


def rank_faults(history: list[dict[str, Any]]) -> dict[int, list[RankFault]]:
    """The recorded faults by rank."""
    faults: dict[int, list[RankFault]] = {}
    for entry in history:
        pods, nodes = entry.get("pods") or [], entry.get("nodes") or []
        for index, rank in enumerate(entry.get("ranks") or []):
            if not str(rank).isdigit():
                continue
            faults.setdefault(int(rank), []).append(
                RankFault(
                    restart=entry.get("restart"),
                    restart_type=entry.get("restart_type"),
                    pod=pods[index] if index < len(pods) else None,
                    node=(nodes[index] or None) if index < len(nodes) else None,
                )
            )
    return faults


def fault_reason(history: list[dict[str, Any]], message: str | None) -> str | None:
    """The reason of a job that failed on a recorded fault: the faulty ranks, then the
    operator's message."""
    final = next((e for e in reversed(history) if e.get("restart") is None), None)
    if not final or not final.get("ranks"):
        return message
    pods, nodes = final.get("pods") or [], final.get("nodes") or []
    parts = []
    for index, rank in enumerate(final["ranks"]):
        where = [p for p in (pods[index] if index < len(pods) else None,) if p]
        node = nodes[index] if index < len(nodes) else None
        if node:
            where.append(f"on {node}")
        parts.append(f"rank {rank}" + (f" ({' '.join(where)})" if where else ""))
    text = f"{', '.join(parts)} faulty"
    return f"{text}: {message}" if message else text


def latest_condition(conditions: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The condition that says where the job is now: the last one that is True (the operators
    append in order; the transition time breaks ties when they do not)."""
    true_ones = [c for c in conditions if c.get("status") == "True"]
    if not true_ones:
        return None
    return max(
        enumerate(true_ones),
        key=lambda item: (timestamp(item[1].get("lastTransitionTime")) or 0.0, item[0]),
    )[1]


_SUCCEEDED = {"Succeeded", "Completed", "Complete"}
_FAILED = {"Failed", "Error"}
_RUNNING = {"Running", "PodsRunning", "Restarting", "Resuming", "Resumed"}


def job_update(
    obj: dict[str, Any],
    pods: list[dict[str, Any]],
    events: list[str] | None = None,
    faults: list[dict[str, Any]] | None = None,
) -> JobUpdate:
    """What one job object and its pods say now; `faults`: the fault history recorded so far
    (`record_faults`), kept in the update's data when it grew."""
    status = obj.get("status") or {}
    conditions = status.get("conditions") or []
    latest = latest_condition(conditions)
    ctype = (latest or {}).get("type", "")
    reason_text = None
    if latest:
        reason_text = latest.get("message") or latest.get("reason")

    ranked: dict[int, dict[str, Any]] = {}
    for pod in pods:
        rank = rank_of_pod(pod)
        if rank is None:
            continue
        # A recreated pod (auto-resume) replaces the old one for the same rank.
        current = ranked.get(rank)
        if current is None or (
            timestamp((pod.get("metadata") or {}).get("creationTimestamp")) or 0
        ) >= (timestamp((current.get("metadata") or {}).get("creationTimestamp")) or 0):
            ranked[rank] = pod
    ranks = [pod_rank_info(ranked[rank], rank) for rank in sorted(ranked)]
    # A HyperPodPyTorchJob restarts by making its pods again: the job counts its restarts.
    job_restarts = int(status.get("restartCount") or 0)
    for info in ranks:
        info.restarts = max(info.restarts, job_restarts)

    exit_code: int | None = None
    if ctype in _SUCCEEDED:
        state = JobState.SUCCEEDED
        exit_code = 0
    elif ctype in _FAILED:
        state = JobState.FAILED
        codes = [r.exit_code for r in ranks if r.exit_code not in (None, 0)]
        exit_code = codes[0] if codes else 1
    elif ctype in _RUNNING or any(
        (p.get("status") or {}).get("phase") == "Running" for p in ranked.values()
    ):
        state = JobState.RUNNING
    else:
        state = JobState.PENDING

    if state in (JobState.PENDING, JobState.RUNNING):
        problems = [
            f"worker {rank}: {problem}"
            for rank, pod in sorted(ranked.items())
            if (problem := pod_problem(pod))
        ]
        if problems:
            reason_text = "; ".join(problems[:3]) + (
                f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
            )
        elif ctype == "Restarting":
            reason_text = f"restarting: {reason_text}" if reason_text else "restarting"

    started = timestamp(status.get("startTime"))
    if started is None:
        running = [c for c in conditions if c.get("type") in _RUNNING and c.get("status") == "True"]
        started = timestamp(running[0].get("lastTransitionTime")) if running else None
    if started is None and state is not JobState.PENDING:
        starts = [timestamp((p.get("status") or {}).get("startTime")) for p in ranked.values()]
        started = min((s for s in starts if s), default=None)
    ended = None
    if state.finished:
        ended = timestamp(status.get("completionTime")) or timestamp(
            (latest or {}).get("lastTransitionTime")
        )

    history = record_faults(status, faults or [], state is JobState.FAILED)
    by_rank = rank_faults(history)
    for info in ranks:
        info.faults = by_rank.get(info.rank, [])
    if state is JobState.FAILED:
        reason_text = fault_reason(history, reason_text)
    return JobUpdate(
        state=state,
        state_reason=reason_text,
        started=started,
        ended=ended,
        exit_code=exit_code,
        ranks=ranks,
        events=events,
        data=KubernetesState(faults=history) if history != (faults or []) else None,
    )


OWN_EVENTS_KEPT = 40
"""Lines of our own (not the cluster's warnings) kept on a Kubernetes job's events."""


def is_cluster_event(line: str, names: set[str]) -> bool:
    """Whether `line` is one of `format_events`' ("<Kind> <name>: <reason>: ...") about one of
    `names`: a refresh replaces those with the cluster's current warnings."""
    parts = line.split(" ", 2)
    return len(parts) == 3 and parts[1].endswith(":") and parts[1][:-1] in names


def format_events(
    events: Iterable[dict[str, Any]], names: set[str], limit: int = 10
) -> dict[str, list[str]]:
    """Warning events about the given objects (job or pod names), newest last, keyed by object name."""
    result: dict[str, list[tuple[float, str]]] = {}
    for event in events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        name = involved.get("name")
        if name not in names:
            continue
        when = (
            timestamp(event.get("lastTimestamp"))
            or timestamp(event.get("eventTime"))
            or timestamp((event.get("metadata") or {}).get("creationTimestamp"))
            or 0.0
        )
        count = event.get("count") or 1
        text = f"{involved.get('kind', 'Object')} {name}: {event.get('reason', '')}: {event.get('message') or event.get('note') or ''}".rstrip()
        if count > 1:
            text += f" (x{count})"
        result.setdefault(name, []).append((when, text))
    return {name: [text for _, text in sorted(items)[-limit:]] for name, items in result.items()}
