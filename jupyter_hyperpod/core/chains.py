"""Chains (#24 item 4): a job waits for others (`JobSpec.after`, `after_any`).

- `check_after`: at submit, what a job may wait for: the user's own jobs (403 otherwise) of the
  connected cluster that exist (400), not already failed when success is required (400).
- `AfterGate`: the hold engine's gate (`core/holds.py`): ready once every job it waits for
  succeeded (or ended, with `after_any`), doomed when one failed ("prepare failed: exit code 1").
  On a backend that holds jobs itself (Slurm `--dependency`), a job is started on it as soon as
  every unfinished job it waits for is there (`cluster_dependency`); Slurm then holds it, and
  the gate still cancels it with the reason when a job it waits for fails.
- `plan_chain`: a whole chain in one request (`POST jobs/chain`): links by key, `after` naming
  earlier links or existing jobs, the outputs of one passed to the next (`{{key.param}}`),
  refused with its cycle.
- `chain_of`, `resume_plan`: a chain's links, and which links a resume runs again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, Field, ValidationError

from .errors import Forbidden, InvalidRequest, validation_error
from .holds import READY, JobLookup, Verdict, doomed, waiting
from .models import Job, JobSpec, JobState
from .models.specs import JOB_ID_PATTERN, MAX_AFTER

MAX_LINKS = 32
"""Links of one `POST jobs/chain` at most."""
MAX_CHAIN = 200
"""Jobs a chain view or a resume walks at most."""
REFERENCE = re.compile(r"\{\{\s*([a-z0-9][-a-z0-9]*)\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
"""`{{key.param}}` in a link's values: the earlier link's parameter (or `id`, its job id)."""


# -- the models that cross REST ------------------------------------------------------------
class ChainLinkRequest(BaseModel):
    """One link of a chain: a submit body (a template with params, or a full spec) with a key
    the later links name in `after` and in `{{key.param}}`."""

    model_config = {"extra": "forbid"}

    key: str | None = Field(
        None,
        pattern=r"^[a-z0-9][-a-z0-9]{0,51}$",
        description="What later links call this one (default: its name)",
    )
    job: dict[str, Any] = Field(
        description="The submit body: {name, template, params, overrides} or a full JobSpec"
    )
    after: list[str] = Field(
        default_factory=list,
        max_length=MAX_AFTER,
        description="Keys of earlier links, or ids of existing jobs, this link waits for",
    )
    after_any: bool = Field(False, description="Start once they ended, whatever their state")


class ChainRequest(BaseModel):
    """`POST jobs/chain`: the links, in any order; each waits for those its `after` names."""

    model_config = {"extra": "forbid"}

    links: list[ChainLinkRequest] = Field(min_length=1, max_length=MAX_LINKS)


class ChainLink(BaseModel):
    """One job of a chain, as the chain view shows it."""

    id: str
    name: str
    state: JobState
    state_reason: str | None = None
    held: str | None = Field(None, description="Why the server still holds it (not started)")
    after: list[str] = Field(default_factory=list, description="The job ids it waits for")
    after_any: bool = False
    created: float


class JobChain(BaseModel):
    """`GET jobs/{id}/chain`: every job linked to this one by `after`, oldest first."""

    job_id: str
    links: list[ChainLink]
    failed: str | None = Field(
        None, description="The first link that failed, where a resume starts; null when none"
    )


class ResumeRequest(BaseModel):
    """`POST jobs/{id}/resume`."""

    model_config = {"extra": "forbid"}

    with_changes: bool = Field(
        False,
        description="false: each link's snapshot; true: the workdir's files as they are now",
    )


class ChainSubmitted(BaseModel):
    """What `POST jobs/chain` and `POST jobs/{id}/resume` started, in chain order."""

    jobs: list[Job]


# -- what a job may wait for -----------------------------------------------------------------
class OwnJobs(JobLookup, Protocol):
    """A JobLookup that can also tell whose a job is (the store's row, any user)."""

    def owner_of(self, job_id: str) -> tuple[str, str, str] | None:
        """(user, orchestrator, cluster) of a stored job, any user's; None when unknown."""
        ...


def check_after(
    spec: JobSpec, jobs: OwnJobs, *, user: str, orchestrator: str, cluster: str
) -> None:
    """Refuse what a job may not wait for (nothing is created): an unknown id (400), another
    user's job (403), one of another cluster (400), one that already failed when success is
    required (400: resume it instead)."""
    for job_id in spec.after:
        owner = jobs.owner_of(job_id)
        if owner is None:
            raise InvalidRequest(f"after: no job '{job_id}' to wait for", field="after")
        if owner[0] != user:
            raise Forbidden(
                f"after: job '{job_id}' is not yours: a job waits only for your own jobs",
                field="after",
            )
        if owner[1:] != (orchestrator, cluster):
            raise InvalidRequest(
                f"after: job '{job_id}' is on the {owner[1]} cluster '{owner[2]}', not this one",
                field="after",
            )
        upstream = jobs.record(job_id)
        if (
            upstream is not None
            and upstream.state.finished
            and upstream.state is not JobState.SUCCEEDED
            and not spec.after_any
        ):
            raise InvalidRequest(
                f"after: {ended_reason(upstream)}: it can never succeed; resume it "
                f"(`resume {job_id}`) or wait for it with after_any",
                field="after",
            )


def ended_reason(job: Job) -> str:
    """'prepare failed: exit code 1 (prepare-1a2b3c)': why a job a chain waits for ended."""
    if job.state is JobState.FAILED:
        why = job.state_reason or (
            f"exit code {job.exit_code}" if job.exit_code is not None else "failed"
        )
        return f"{job.name} failed: {why} ({job.id})"
    why = f": {job.state_reason}" if job.state_reason else ""
    return f"{job.name} was {job.state.value.lower()}{why} ({job.id})"


class AfterGate:
    """The chain's gate: `JobSpec.after`. `native()`: the backend holds a job itself, given the
    cluster ids of the jobs it waits for (Slurm `--dependency`)."""

    name = "after"

    def __init__(self, *, native: Callable[[], bool] = lambda: False) -> None:
        self.native = native

    def applies(self, job: Job) -> bool:
        return bool(job.spec.after) and job.state is JobState.PENDING

    def decide(self, job: Job, jobs: JobLookup) -> Verdict:
        waits: list[Job] = []
        for job_id in job.spec.after:
            upstream = jobs.record(job_id)
            if upstream is None:
                return doomed(f"{job_id}, which it waits for, was removed")
            if upstream.state is JobState.SUCCEEDED:
                continue
            if upstream.state.finished:
                if job.spec.after_any:
                    continue
                return doomed(ended_reason(upstream))
            if upstream.backend_id and upstream.held is None and self.native():
                continue  # on the cluster: the cluster holds this job until it ends
            waits.append(upstream)
        if not waits:
            return READY
        return waiting("waiting for " + ", ".join(f"{up.id} ({up.name})" for up in waits))


@dataclass(frozen=True)
class ClusterDependency:
    """What a backend that holds jobs itself is given: wait for these cluster job ids."""

    backend_ids: tuple[str, ...]
    any: bool
    """afterany (True) or afterok."""

    def slurm(self) -> str:
        """sbatch's `--dependency` value."""
        return f"{'afterany' if self.any else 'afterok'}:{':'.join(self.backend_ids)}"


def cluster_dependency(spec: JobSpec, jobs: JobLookup) -> ClusterDependency | None:
    """The unfinished jobs a job waits for, by their cluster ids (None when none is left)."""
    ids = []
    for job_id in spec.after:
        upstream = jobs.record(job_id)
        if upstream is not None and not upstream.state.finished and upstream.backend_id:
            ids.append(upstream.backend_id)
    return ClusterDependency(tuple(ids), spec.after_any) if ids else None


# -- a chain in one request ------------------------------------------------------------------
@dataclass
class PlannedLink:
    key: str
    body: dict[str, Any]
    after_keys: list[str]
    after_ids: list[str]
    after_any: bool


def chain_request(body: Any) -> ChainRequest:
    if not isinstance(body, dict):
        raise InvalidRequest('the body must be {"links": [...]}', field="links")
    try:
        return ChainRequest.model_validate(body)
    except ValidationError as error:
        raise validation_error(error) from None


def plan_chain(request: ChainRequest) -> list[PlannedLink]:
    """The links in an order that starts each after those it waits for; a key named twice, an
    `after` that names neither a link nor a job id, a reference to a link it does not wait for,
    or a cycle is refused (400) before anything is created."""
    links: dict[str, PlannedLink] = {}
    every_key = {link.key or link.job.get("name") for link in request.links}
    for index, link in enumerate(request.links):
        name = link.job.get("name")
        key = link.key or (name if isinstance(name, str) else None)
        if not key:
            raise InvalidRequest(f"links[{index}]: give it a key or a name", field="links")
        if key in links:
            raise InvalidRequest(f"links[{index}]: the key '{key}' is used twice", field="links")
        keys = [item for item in link.after if item in every_key]
        ids = [item for item in link.after if item not in keys]
        for job_id in ids:
            if not JOB_ID_PATTERN.match(job_id):
                raise InvalidRequest(
                    f"links[{index}].after: '{job_id[:80]}' is neither a link of this chain nor "
                    "a job id",
                    field="links",
                )
        links[key] = PlannedLink(key, dict(link.job), keys, ids, link.after_any)
    order = _topological(links)
    for planned in order:
        for ref_key, _ in _references(planned.body):
            if ref_key not in _upstream_keys(planned, links):
                raise InvalidRequest(
                    f"link '{planned.key}' uses {{{{{ref_key}...}}}} but does not wait for "
                    f"'{ref_key}': add it to its after",
                    field="links",
                )
    return order


def _upstream_keys(link: PlannedLink, links: Mapping[str, PlannedLink]) -> set[str]:
    seen: set[str] = set()
    todo = list(link.after_keys)
    while todo:
        key = todo.pop()
        if key not in seen:
            seen.add(key)
            todo.extend(links[key].after_keys)
    return seen


def _topological(links: Mapping[str, PlannedLink]) -> list[PlannedLink]:
    order: list[PlannedLink] = []
    state: dict[str, int] = {}  # 1: on the path, 2: placed

    def visit(key: str, path: list[str]) -> None:
        if state.get(key) == 2:
            return
        if state.get(key) == 1:
            cycle = [*path[path.index(key) :], key]
            raise InvalidRequest(
                "the chain has a cycle: " + " -> ".join(cycle) + ": no link of it could start",
                field="links",
            )
        state[key] = 1
        for upstream in links[key].after_keys:
            visit(upstream, [*path, key])
        state[key] = 2
        order.append(links[key])

    for key in links:
        visit(key, [])
    return order


def _references(value: Any) -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        for match in REFERENCE.finditer(value):
            yield match.group(1), match.group(2)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)


def has_references(value: Any) -> bool:
    return next(iter(_references(value)), None) is not None


def fill_references(value: Any, outputs: Mapping[str, Mapping[str, Any]]) -> Any:
    """`{{key.param}}` replaced by the earlier link's value (`id`: its job id; a parameter of
    its spec or of its template, with ${HYPERPOD_JOB_ID} as its job id)."""
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            key, name = match.group(1), match.group(2)
            known = outputs.get(key, {})
            if name not in known:
                raise InvalidRequest(
                    f"{{{{{key}.{name}}}}}: link '{key}' has no value '{name}' (its "
                    f"parameters: {', '.join(sorted(known)) or 'none'})",
                    field="links",
                )
            return str(known[name])

        return REFERENCE.sub(one, value)
    if isinstance(value, dict):
        return {k: fill_references(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_references(v, outputs) for v in value]
    return value


def outputs_of(job: Job) -> dict[str, Any]:
    """What later links may use of a started link: its id, its template's parameters, its
    environment variables and its spec's plain fields, `${HYPERPOD_JOB_ID}` in them as its id."""
    found: dict[str, Any] = {}
    named = {**job.spec.model_dump(mode="json"), **job.spec.env, **job.spec.params}
    for name, value in named.items():
        if isinstance(value, (str, int, float, bool)):
            found[name] = (
                value.replace("${HYPERPOD_JOB_ID}", job.id) if isinstance(value, str) else value
            )
    found["id"] = job.id
    return found


def link_body(link: PlannedLink, ids: Mapping[str, str]) -> dict[str, Any]:
    """A link's submit body with its after as job ids (earlier links' ids by key)."""
    body = dict(link.body)
    after = [ids[key] for key in link.after_keys] + link.after_ids
    if "template" in body and "command" not in body:
        overrides = dict(body.get("overrides") or {})
        overrides.update(after=after, after_any=link.after_any)
        body["overrides"] = overrides
    else:
        body.update(after=after, after_any=link.after_any)
    return body


# -- a chain's links, and what a resume runs -------------------------------------------------
def chain_of(
    job: Job,
    record: Callable[[str], Job | None],
    dependents: Callable[[list[str]], list[Job]],
) -> JobChain:
    """Every job linked to `job` through `after`, both ways, oldest first (MAX_CHAIN at most)."""
    found: dict[str, Job] = {job.id: job}
    todo = [job]
    while todo and len(found) < MAX_CHAIN:
        batch, todo = todo, []
        for current in batch:
            for job_id in current.spec.after:
                if job_id not in found:
                    upstream = record(job_id)
                    if upstream is not None:
                        found[job_id] = upstream
                        todo.append(upstream)
        for down in dependents([current.id for current in batch]):
            if down.id not in found:
                found[down.id] = down
                todo.append(down)
    jobs = sorted(found.values(), key=lambda item: (item.created, item.id))
    failed = next((item.id for item in jobs if item.state is JobState.FAILED), None)
    return JobChain(
        job_id=job.id,
        links=[
            ChainLink(
                id=item.id,
                name=item.name,
                state=item.state,
                state_reason=item.state_reason,
                held=item.held,
                after=item.spec.after,
                after_any=item.spec.after_any,
                created=item.created,
            )
            for item in jobs
        ],
        failed=failed,
    )


def resume_plan(failed: Job, dependents: Callable[[list[str]], list[Job]]) -> list[Job]:
    """The links a resume from `failed` runs again, in chain order: the failed (or cancelled)
    link, then every link that waited on it, directly or not, and neither succeeded nor runs
    (one still waiting is cancelled by the resume, its new run waits instead)."""
    if failed.state not in (JobState.FAILED, JobState.CANCELLED):
        raise InvalidRequest(
            f"job '{failed.id}' is {failed.state.value}: a chain resumes from a link that "
            "failed or was cancelled",
            field="id",
        )
    plan = [failed]
    seen = {failed.id}
    frontier = [failed.id]
    while frontier and len(plan) < MAX_CHAIN:
        found = dependents(frontier)
        frontier = []
        for job in found:
            if job.id in seen or job.state in (JobState.SUCCEEDED, JobState.RUNNING):
                continue
            seen.add(job.id)
            plan.append(job)
            frontier.append(job.id)
    return plan
