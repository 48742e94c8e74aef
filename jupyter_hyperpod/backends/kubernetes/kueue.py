"""Why Kueue (HyperPod task governance) holds a job: its Workload's admission conditions.

Kueue makes one Workload per queued job, owned by it and labelled `kueue.x-k8s.io/job-uid`
(kubernetes-sigs/kueue `pkg/controller/jobframework/reconciler.go` constructWorkload), and keeps
the job suspended until the Workload is admitted. Its conditions (`apis/kueue/v1beta1/
workload_types.go`): QuotaReserved (False, reason Pending, with the flavor assigner's message such
as "couldn't assign flavors to pod set worker: insufficient quota for nvidia.com/gpu in flavor
ml.p5.48xlarge, request > maximum capacity (16 > 8)"), Admitted, Evicted, Preempted, Finished.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ...core.backend import JobUpdate
from ...core.errors import Forbidden, NotFound

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WORKLOAD_KIND = ("kueue.x-k8s.io", "v1beta1", "workloads", "Workload")
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


def _conditions(workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type", ""): c for c in (workload.get("status") or {}).get("conditions") or []}


def workload_reason(workload: dict[str, Any]) -> str | None:
    """Why the Workload's job does not run yet, in Kueue's words; None once it is admitted."""
    conditions = _conditions(workload)
    queue = (workload.get("spec") or {}).get("queueName") or "its queue"
    admitted = conditions.get("Admitted", {})
    evicted = conditions.get("Evicted", {})
    if evicted.get("status") == "True":
        return f"Kueue evicted it: {evicted.get('message') or evicted.get('reason') or ''}".rstrip(
            ": "
        )
    if admitted.get("status") == "True":
        return None
    quota = conditions.get("QuotaReserved", {})
    if quota.get("status") == "False":
        return f"Kueue has not admitted it ({queue}): {quota.get('message') or quota.get('reason')}"
    if quota.get("status") == "True":
        checks = [
            f"{check.get('name')}: {check.get('message') or check.get('state')}"
            for check in (workload.get("status") or {}).get("admissionChecks") or []
            if check.get("state") != "Ready"
        ]
        return "Kueue reserved quota, waiting for admission checks" + (
            f" ({'; '.join(checks)})" if checks else ""
        )
    return f"waiting for Kueue to admit it ({queue})"


def workloads_by_job(workloads: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Workloads by the uid of the job that owns them (the controller owner, else the label)."""
    found: dict[str, dict[str, Any]] = {}
    for workload in workloads:
        meta = workload.get("metadata") or {}
        owners = [o for o in meta.get("ownerReferences") or [] if o.get("controller")]
        uid = owners[0].get("uid") if owners else (meta.get("labels") or {}).get(JOB_UID_LABEL)
        if uid:
            found[uid] = workload
    return found


def explain_queued(
    serves: Callable[[tuple[str, str, str, str]], bool | None],
    list_workloads: Callable[[str, str], list[dict[str, Any]]],
    namespace: str,
    waiting: list[tuple[str, dict[str, Any]]],
    updates: dict[str, JobUpdate],
    chunk: int = 50,
) -> dict[str, str]:
    """Set the reason of each waiting job (job id, job object) that Kueue holds, from its
    Workload; returns the Workload name by job id (its events explain the job too). Nothing
    where the cluster has no Kueue or this user may not read Workloads."""
    if not waiting or not serves(WORKLOAD_KIND):
        return {}
    by_uid = {
        str((obj.get("metadata") or {}).get("uid")): job_id
        for job_id, obj in waiting
        if (obj.get("metadata") or {}).get("uid")
    }
    uids = sorted(by_uid)
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(uids), chunk):
        selector = f"{JOB_UID_LABEL} in ({','.join(uids[start : start + chunk])})"
        try:
            found.update(workloads_by_job(list_workloads(namespace, selector)))
        except (Forbidden, NotFound):
            return {}
    names: dict[str, str] = {}
    for uid, workload in found.items():
        job_id = by_uid.get(uid)
        if job_id is None or job_id not in updates:
            continue
        names[job_id] = (workload.get("metadata") or {}).get("name", "")
        reason = workload_reason(workload)
        if reason:
            updates[job_id].state_reason = reason
    return names


def queued(obj: dict[str, Any]) -> bool:
    """The job is Kueue's: it names a queue, or Kueue's webhook suspended it."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    run_policy = (obj.get("spec") or {}).get("runPolicy") or {}
    return bool(labels.get(QUEUE_LABEL) or run_policy.get("suspend"))
