"""What an agent asks of a job that does not run as hoped: why it waits, why it failed (the
rank that failed first and the last lines of its log), and its metrics in a few numbers."""

from __future__ import annotations

from typing import Any

from ..core.api import HyperPodAPI
from ..core.errors import HyperPodError
from ..core.models import Job, JobMetrics, JobState, RankInfo


def first_failed_rank(job: Job) -> RankInfo | None:
    """The rank the job failed on first, as the server decided it (`Job.failed_rank`)."""
    return next((rank for rank in job.ranks if rank.rank == job.failed_rank), None)


def _pending_row(api: HyperPodAPI, job: Job) -> dict[str, Any] | None:
    """My queue row for this job (place in the queue, what holds the resources), if any."""
    try:
        page = api.queue(mine=True, state="PENDING", limit=1000)
    except HyperPodError:
        return None
    for row in page.jobs:
        if row.job_id == job.id:
            return {
                "reason": row.reason,
                "position": row.position,
                "explanation": row.explanation,
            }
    return None


def explain(api: HyperPodAPI, job_id: str, *, lines: int = 40) -> dict[str, Any]:
    job = api.job(job_id)
    result: dict[str, Any] = {
        "job_id": job.id,
        "name": job.name,
        "state": job.state.value,
        "reason": job.state_reason,
        "exit_code": job.exit_code,
        "events": job.events[-10:],
    }
    if job.state == JobState.PENDING:
        queued = _pending_row(api, job)
        result["queue"] = queued
        why = (queued or {}).get("explanation") or job.state_reason or "waiting to be scheduled"
        result["summary"] = f"job {job.id} is pending: {why}"
        return result
    if job.state in (JobState.FAILED, JobState.CANCELLED):
        rank = first_failed_rank(job)
        shown = rank.rank if rank is not None else 0
        snapshot = api.logs(job.id, rank=shown, tail=lines)
        result.update(
            failed_rank=rank.rank if rank is not None else None,
            rank_node=rank.node if rank is not None else None,
            rank_exit_code=rank.exit_code if rank is not None else None,
            faults=[fault.model_dump(mode="json") for fault in rank.faults] if rank else [],
            log_rank=shown,
            last_lines=snapshot.text,
        )
        code = f" (exit code {job.exit_code})" if job.exit_code is not None else ""
        first = f"; rank {rank.rank} failed first" if rank is not None else ""
        where = f" on {rank.node}" if rank is not None and rank.node else ""
        reason = f": {job.state_reason}" if job.state_reason else ""
        result["summary"] = (
            f"job {job.id} {job.state.value.lower()}{code}{reason}{first}{where}; "
            f"the last lines of rank {shown}'s log are in last_lines"
        )
        return result
    progress = f" ({job.progress.step}/{job.progress.total})" if job.progress else ""
    result["summary"] = f"job {job.id} is {job.state.value}{progress}: neither pending nor failed"
    return result


def metrics_summary(metrics: JobMetrics) -> dict[str, Any]:
    """Per metric: points, first and last (step, value), min and max."""
    summary: dict[str, Any] = {}
    for name, points in sorted(metrics.metrics.items()):
        if not points:
            continue
        values = [point.value for point in points]
        summary[name] = {
            "points": len(points),
            "first": {"step": points[0].step, "value": points[0].value},
            "last": {"step": points[-1].step, "value": points[-1].value},
            "min": min(values),
            "max": max(values),
        }
    return {
        "run": metrics.run.model_dump(mode="json") if metrics.run else None,
        "metrics": summary,
        "message": metrics.message,
    }


__all__ = ["explain", "first_failed_rank", "metrics_summary"]
