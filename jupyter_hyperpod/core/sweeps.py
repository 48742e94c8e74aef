"""Sweeps (#24 item 3): one request, a group of ordinary jobs.

A sweep names a template, the parameters every member shares, and for some parameters a list of
values: the grid (every combination, in the order given) or listed points. Each member is a job
of its own (its snapshot, logs, rerun) whose spec carries a `SweepTag` (the group id, its point,
the cap): the group is read back from its members alone. What this module holds: the request and
result models, the expansion into points (counted before anything is built, so a sweep over the
limit costs nothing), readable member names, the summary of a group (counts per state, progress,
the best member by a metric) and the slot gate that keeps at most `max_concurrent` members
started (`core/holds.py`).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from .errors import InvalidRequest, validation_error
from .holds import READY, JobLookup, Verdict, waiting
from .models import Job, JobState, StrictModel, SweepTag
from .models.common import JOB_NAME_PATTERN

DEFAULT_MAX_POINTS = 256
"""`HyperPodSettings.max_sweep_points`' default: members one sweep may have."""
MAX_VALUES = 100_000
"""Values one request may list at all (the limit on points is checked on the count first)."""
NAME_LIMIT = 52
"""A job name's length at most (`JOB_NAME_PATTERN`)."""
SHORT_NAMES = {
    "learning_rate": "lr",
    "lora_r": "r",
    "lora_alpha": "alpha",
    "lora_dropout": "drop",
    "max_steps": "steps",
    "num_train_epochs": "ep",
    "per_device_train_batch_size": "bs",
    "gradient_accumulation_steps": "ga",
    "weight_decay": "wd",
    "warmup_ratio": "warm",
    "quantization": "q",
    "procs_per_node": "ppn",
    "nodes": "n",
    "args": "",
}
"""How a swept parameter reads in a member's name ("<name>-lr2e-4-r16")."""


class SweepRequest(StrictModel):
    """`POST sweeps`: a template submission whose swept parameters take several values."""

    name: str = Field(
        pattern=JOB_NAME_PATTERN, description="The sweep's name; members add their point"
    )
    template: str
    params: dict[str, Any] = Field(
        default_factory=dict, description="The parameters every member shares"
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="JobSpec fields set on top of the template (as POST jobs)"
    )
    sweep: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Parameter -> its values: the members are every combination (the grid), "
        "the first parameter's values varying slowest",
    )
    points: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=MAX_VALUES,
        description="Or the members' points listed, each a mapping parameter -> value",
    )
    max_concurrent: int | None = Field(
        None, ge=1, le=4096, description="Members started at once at most; the others wait"
    )
    metric: str = Field(
        "loss", min_length=1, max_length=250, description="The MLflow metric that ranks members"
    )
    goal: Literal["min", "max"] = Field("min", description="min: the lowest value is best")


class SweepBest(BaseModel):
    """The best member so far: the lowest (or highest) last value of the sweep's metric."""

    job_id: str
    name: str
    value: float
    step: int
    point: dict[str, Any]


class SweepSummary(BaseModel):
    """A group row: one sweep, read from its members."""

    id: str
    name: str
    template: str | None
    fields: list[str] = Field(description="The swept parameters")
    size: int = Field(description="Members the sweep was submitted with")
    members: list[str] = Field(description="The members' job ids still stored, in sweep order")
    counts: dict[str, int] = Field(
        description="Members per state (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED), and "
        "'waiting': the PENDING ones held for a slot"
    )
    state: JobState = Field(
        description="RUNNING while a member is unfinished (PENDING if none started yet), then "
        "SUCCEEDED when all succeeded, FAILED when one failed, else CANCELLED"
    )
    progress: float = Field(description="The share of members finished, 0 to 1")
    max_concurrent: int | None
    metric: str
    goal: Literal["min", "max"]
    best: SweepBest | None = Field(None, description="The best member so far, when one logged")
    created: float


class SweepList(BaseModel):
    sweeps: list[SweepSummary]


class Sweep(BaseModel):
    """One sweep: its group row and its members' jobs (in sweep order)."""

    summary: SweepSummary
    jobs: list[Job]


# -- expansion ------------------------------------------------------------------------------
def sweep_request(body: Any) -> SweepRequest:
    if isinstance(body, BaseModel):
        body = body.model_dump(mode="json")
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    try:
        return SweepRequest.model_validate(body)
    except ValidationError as error:
        raise validation_error(error) from None


def count_points(request: SweepRequest) -> int:
    """How many members the request makes (without making them)."""
    if request.points:
        return len(request.points)
    return math.prod(len(values) for values in request.sweep.values())


def expand(request: SweepRequest, *, limit: int) -> list[dict[str, Any]]:
    """The members' points, in order; refused over `limit` before any is made."""
    if request.points and request.sweep:
        raise InvalidRequest("give sweep (a grid) or points (listed), not both", field="points")
    if not request.points and not request.sweep:
        raise InvalidRequest(
            "a sweep needs values: sweep {parameter: [values]} or points [{parameter: value}]",
            field="sweep",
        )
    for key, values in request.sweep.items():
        if not values:
            raise InvalidRequest(f"{key} has no values to sweep", field=f"sweep.{key}")
        if len(values) != len({_key(value) for value in values}):
            raise InvalidRequest(f"{key} names a value twice", field=f"sweep.{key}")
    total = count_points(request)
    if total > limit:
        raise InvalidRequest(
            f"a sweep of {total:,} points is more than the limit of {limit:,} points a sweep "
            "(HyperPodApp.max_sweep_points): sweep fewer values",
            field="sweep" if request.sweep else "points",
        )
    if request.points:
        fields = list(request.points[0])
        for index, point in enumerate(request.points):
            if not point:
                raise InvalidRequest("a point needs a value", field=f"points.{index}")
            if list(point) != fields:
                raise InvalidRequest(
                    f"every point sets the same parameters ({', '.join(fields)})",
                    field=f"points.{index}",
                )
        seen = {_key(point) for point in request.points}
        if len(seen) != len(request.points):
            raise InvalidRequest("a point is listed twice", field="points")
        points = [dict(point) for point in request.points]
    else:
        keys = list(request.sweep)
        points = [
            dict(zip(keys, values, strict=True))
            for values in itertools.product(*request.sweep.values())
        ]
    shared = sorted(set(points[0]) & set(request.params))
    if shared:
        raise InvalidRequest(
            f"{shared[0]} is both swept and set in params: keep one", field=f"params.{shared[0]}"
        )
    return points


def _key(value: Any) -> str:
    return repr(sorted(value.items())) if isinstance(value, dict) else repr(value)


def value_text(value: Any) -> str:
    """A value as it reads in a job name: 2e-4, 16, 0p5, true."""
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, float) or (isinstance(value, int) and abs(value) >= 10**6):
        number = float(value)
        if number.is_integer() and abs(number) < 10**6:
            text = str(int(number))
        elif number != 0 and (abs(number) < 1e-2 or abs(number) >= 1e6):
            mantissa, exponent = f"{number:.6e}".split("e")
            text = f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
        else:
            text = f"{number:.6g}"
    else:
        text = str(value)
    text = text.lower().replace(".", "p").replace("+", "")
    text = re.sub(r"[^a-z0-9-]+", "-", text)
    return re.sub(r"-{2,}", "-", text).strip("-")


def member_names(name: str, points: Sequence[Mapping[str, Any]]) -> list[str]:
    """Readable, distinct job names: "<name>-lr2e-4-r16", else "<name>-<n>" where the point
    does not fit the job-name rules (52 characters) or two points read the same."""
    names: list[str] = []
    for point in points:
        parts = [
            f"{SHORT_NAMES.get(key, re.sub(r'[^a-z0-9]', '', key.lower())[:8])}{value_text(value)}"
            for key, value in point.items()
        ]
        names.append("-".join([name, *[part for part in parts if part]]))
    width = len(str(len(points) - 1))
    result: list[str] = []
    for index, candidate in enumerate(names):
        if len(candidate) > NAME_LIMIT or names.count(candidate) > 1 or candidate == name:
            suffix = f"-{index:0{width}d}"
            candidate = name[: NAME_LIMIT - len(suffix)].rstrip("-") + suffix
        result.append(candidate)
    return result


def field_of(error_field: str | None, swept: Sequence[str]) -> str | None:
    """A member's error field as the sweep's: params.lr of a swept lr is sweep.lr."""
    if error_field and error_field.startswith("params."):
        key = error_field.removeprefix("params.").split(".", 1)[0]
        if key in swept:
            return f"sweep.{key}"
    return error_field


# -- the group ------------------------------------------------------------------------------
MetricReader = Callable[[Job], tuple[float, int] | None]
"""A member's last value of the sweep's metric and its step (None: not logged)."""


def summarize(members: Sequence[Job], read_metric: MetricReader) -> SweepSummary:
    """The group row of one sweep's stored members (at least one, each tagged)."""
    ordered = sorted(members, key=lambda job: (_tag(job).index, job.created))
    first = _tag(ordered[0])
    counts = {state.value: 0 for state in JobState}
    counts["waiting"] = 0
    for job in ordered:
        counts[job.state.value] += 1
        if job.state == JobState.PENDING and job.held is not None:
            counts["waiting"] += 1
    finished = sum(1 for job in ordered if job.state.finished)
    best: SweepBest | None = None
    for job in ordered:
        if job.state == JobState.PENDING:
            continue
        found = read_metric(job)
        if found is None or math.isnan(found[0]):
            continue
        value, step = found
        better = best is None or (value < best.value if first.goal == "min" else value > best.value)
        if better:
            best = SweepBest(
                job_id=job.id, name=job.name, value=value, step=step, point=_tag(job).point
            )
    return SweepSummary(
        id=first.group,
        name=first.name,
        template=ordered[0].spec.template,
        fields=list(first.point),
        size=first.size,
        members=[job.id for job in ordered],
        counts=counts,
        state=_group_state(ordered),
        progress=finished / max(first.size, len(ordered)),
        max_concurrent=first.max_concurrent,
        metric=first.metric,
        goal=first.goal,
        best=best,
        created=min(job.created for job in ordered),
    )


def _group_state(members: Sequence[Job]) -> JobState:
    if any(not job.state.finished for job in members):
        started = any(job.state != JobState.PENDING for job in members)
        return JobState.RUNNING if started else JobState.PENDING
    states = {job.state for job in members}
    if states == {JobState.SUCCEEDED}:
        return JobState.SUCCEEDED
    return JobState.FAILED if JobState.FAILED in states else JobState.CANCELLED


def _tag(job: Job) -> SweepTag:
    if job.spec.sweep is None:
        raise ValueError(f"job {job.id} is not a sweep member")
    return job.spec.sweep


def last_value(metrics: Mapping[str, Sequence[Any]], name: str) -> tuple[float, int] | None:
    """The last point of one metric history (`JobMetrics.metrics`): (value, step)."""
    points = metrics.get(name) or []
    if not points:
        return None
    last = max(points, key=lambda point: (point.step, point.timestamp))
    return float(last.value), int(last.step)


# -- the concurrency cap ----------------------------------------------------------------------
class SlotGate:
    """A capped sweep's member waits while `max_concurrent` of its group are started and not
    finished (`core/holds.Gate`); it starts as one ends (the next refresh after it)."""

    name = "sweep-slots"

    def applies(self, job: Job) -> bool:
        return job.spec.sweep is not None and job.spec.sweep.max_concurrent is not None

    def decide(self, job: Job, jobs: JobLookup) -> Verdict:
        tag = _tag(job)
        cap = tag.max_concurrent or 0
        started = [
            other
            for other in jobs.records(states=[JobState.PENDING, JobState.RUNNING])
            if other.id != job.id
            and other.held is None
            and other.spec.sweep is not None
            and other.spec.sweep.group == tag.group
        ]
        if len(started) < cap:
            return READY
        return waiting(
            f"waiting for a slot: {len(started)} of sweep {tag.name}'s {cap} started at once"
        )
