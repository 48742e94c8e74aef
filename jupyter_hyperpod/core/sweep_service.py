"""The service's side of sweeps (#24 item 3): a sweep submitted in one request (every member
built and checked before the first is stored: all or nothing), its group rows, bulk cancel.
Given its collaborators by the service (`core/service.py`); the slot gate joins its hold engine.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from .errors import HyperPodError, NotFound
from .holds import Releaser
from .models import Job, JobSpec, SweepTag
from .store import JobStore
from .sweeps import (
    SlotGate,
    Sweep,
    SweepList,
    SweepRequest,
    SweepSummary,
    expand,
    field_of,
    last_value,
    member_names,
    summarize,
    sweep_request,
)
from .timed_cache import TimedCache

Scope = Callable[[], tuple[str, str]]
"""(orchestrator kind, cluster name) the service is connected to now."""
METRIC_MAX_AGE = 10.0
"""Seconds a running member's metric reading is reused (a finished member's is kept)."""


class SweepService:
    """`build(body)`: a template submission as a validated JobSpec (POST jobs' way); `check(spec)`:
    what the backend would refuse, refused now (the render's checks); `start(spec)`: the submit
    of one spec (snapshot, store, start or hold); `cancel(job_id)`, `forget(job_id)`: the
    service's; `metrics(job_id)`: a job's MLflow histories (`JobMetrics`)."""

    def __init__(
        self,
        store: JobStore,
        user: str,
        scope: Scope,
        releaser: Releaser,
        *,
        max_points: Callable[[], int],
        build: Callable[[Any], JobSpec],
        check: Callable[[JobSpec], object],
        start: Callable[[JobSpec], Job],
        cancel: Callable[[str], object],
        forget: Callable[[str], object],
        metrics: Callable[[str], Any],
    ) -> None:
        self.store = store
        self.user = user
        self.scope = scope
        self.max_points = max_points
        self.build = build
        self.check = check
        self.start = start
        self.cancel_job = cancel
        self.forget = forget
        self.metrics = metrics
        self._running_metric: TimedCache[tuple[str, str], tuple[float, int] | None] = TimedCache(
            METRIC_MAX_AGE
        )
        self._final_metric: dict[tuple[str, str], tuple[float, int] | None] = {}
        releaser.add_gate(SlotGate())

    # -- submit ----------------------------------------------------------------------------
    def submit(self, body: Any) -> Sweep:
        request = sweep_request(body)
        specs = self.plan(request)
        started: list[Job] = []
        try:
            for spec in specs:
                started.append(self.start(spec))
        except HyperPodError as error:
            for job in started:  # all or nothing: what was made before the refusal goes
                self.forget(job.id)
            error.field = field_of(
                error.field, list(specs[0].sweep.point if specs[0].sweep else {})
            )
            raise
        return self.sweep(specs[0].sweep.group if specs[0].sweep else "")

    def plan(self, request: SweepRequest) -> list[JobSpec]:
        """Every member's spec, built and checked; nothing is stored."""
        points = expand(request, limit=self.max_points())
        names = member_names(request.name, points)
        group = f"{request.name}-{secrets.token_hex(3)}"
        swept = list(points[0])
        specs: list[JobSpec] = []
        for index, (name, point) in enumerate(zip(names, points, strict=True)):
            body = {
                "name": name,
                "template": request.template,
                "params": {**request.params, **point},
                "overrides": request.overrides,
            }
            try:
                spec = self.build(body)
                tag = SweepTag(
                    group=group,
                    name=request.name,
                    index=index,
                    size=len(points),
                    point=point,
                    max_concurrent=request.max_concurrent,
                    metric=request.metric,
                    goal=request.goal,
                )
                spec = spec.model_copy(update={"sweep": tag})
                self.check(spec)
            except HyperPodError as error:
                where = ", ".join(f"{key}={value}" for key, value in point.items())
                error.message = f"sweep point {index + 1} ({where}): {error.message}"
                error.field = field_of(error.field, swept)
                raise
            specs.append(spec)
        return specs

    # -- groups ----------------------------------------------------------------------------
    def members(self, group: str | None = None) -> list[Job]:
        orchestrator, cluster = self.scope()
        return self.store.sweep_members(
            orchestrator=orchestrator, cluster=cluster, user=self.user, group=group
        )

    def sweeps(self) -> SweepList:
        """Every sweep of the user here, newest first."""
        groups: dict[str, list[Job]] = {}
        for job in self.members():
            if job.spec.sweep is not None:
                groups.setdefault(job.spec.sweep.group, []).append(job)
        summaries = [summarize(jobs, self._metric) for jobs in groups.values()]
        summaries.sort(key=lambda summary: (summary.created, summary.id), reverse=True)
        return SweepList(sweeps=summaries)

    def sweep(self, group: str) -> Sweep:
        jobs = self.members(group)
        if not jobs:
            raise NotFound(f"no sweep '{group}' on this cluster", field="id")
        summary: SweepSummary = summarize(jobs, self._metric)
        order = {job_id: place for place, job_id in enumerate(summary.members)}
        return Sweep(summary=summary, jobs=sorted(jobs, key=lambda job: order[job.id]))

    def cancel(self, group: str) -> Sweep:
        """Cancel every unfinished member: the waiting ones first (so none starts meanwhile)."""
        jobs = self.members(group)
        if not jobs:
            raise NotFound(f"no sweep '{group}' on this cluster", field="id")
        unfinished = [job for job in jobs if not job.state.finished]
        unfinished.sort(key=lambda job: (job.held is None, job.created))
        for job in unfinished:
            self.cancel_job(job.id)
        return self.sweep(group)

    def _metric(self, job: Job) -> tuple[float, int] | None:
        tag = job.spec.sweep
        if tag is None:
            return None
        key = (job.id, tag.metric)
        if job.state.finished and key in self._final_metric:
            return self._final_metric[key]

        def read() -> tuple[float, int] | None:
            try:
                found = self.metrics(job.id)
            except HyperPodError:
                return None
            return last_value(found.metrics, tag.metric)

        if job.state.finished:
            value = read()
            if value is not None:  # none yet: MLflow may still be writing the last points
                self._final_metric[key] = value
            return value
        return self._running_metric.read(key, read)
