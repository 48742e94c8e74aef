"""The service's side of holds and chains (#24 items 3 and 4): the user's stored jobs as the
gates read them, the hold engine with the chain's gate, a chain submitted in one request, a
chain's links and its resume. Given its collaborators by the service (`core/service.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from .chains import (
    AfterGate,
    ChainRequest,
    ChainSubmitted,
    JobChain,
    chain_of,
    check_after,
    cluster_dependency,
    fill_references,
    has_references,
    link_body,
    outputs_of,
    plan_chain,
    resume_plan,
)
from .errors import HyperPodError, InvalidRequest, NotFound
from .holds import Releaser, Verdict
from .models import Job, JobSpec, JobState
from .store import JobStore

Scope = Callable[[], tuple[str, str]]
"""(orchestrator kind, cluster name) the service is connected to now."""


class UserJobs:
    """One user's stored jobs, as gates and chain checks read them (`holds.JobLookup`)."""

    def __init__(self, store: JobStore, user: str, scope: Scope) -> None:
        self.store = store
        self.user = user
        self.scope = scope

    def record(self, job_id: str) -> Job | None:
        found = self.store.get(job_id)
        if found is None or found[0].user != self.user:
            return None
        return found[0]

    def records(self, *, states: Sequence[JobState] | None = None) -> list[Job]:
        orchestrator, cluster = self.scope()
        rows, _ = self.store.query(
            orchestrator=orchestrator,
            cluster=cluster,
            user=self.user,
            states=list(states) if states else None,
        )
        return [job for job, _, _ in rows]

    def owner_of(self, job_id: str) -> tuple[str, str, str] | None:
        found = self.store.get(job_id)
        if found is None:
            return None
        job, cluster, _ = found
        return job.user, job.orchestrator, cluster

    def dependents(self, job_ids: list[str]) -> list[Job]:
        return self.store.dependents(job_ids, user=self.user)


class ChainService:
    """`start_spec(spec, rerun_of)`: the service's submit of a spec (a rerun of a snapshot when
    `rerun_of`); `start_stored(job_id)`: start a stored held job on the cluster; `cancel_on_
    cluster(job, reason)`: cancel a started job there with the reason."""

    def __init__(
        self,
        store: JobStore,
        user: str,
        scope: Scope,
        *,
        owner: str,
        native: Callable[[], bool],
        start_spec: Callable[[JobSpec, str | None], Job],
        start_stored: Callable[[str], object],
        cancel_on_cluster: Callable[[Job, str], object],
        spec_from_body: Callable[[Any], JobSpec],
        forget: Callable[[str], object],
    ) -> None:
        self.jobs = UserJobs(store, user, scope)
        self.store = store
        self.scope = scope
        self.owner = owner
        """This service's lease: the owner of a held job whose hold it claims."""
        self.native = native
        self.start_spec = start_spec
        self.spec_from_body = spec_from_body
        self.forget = forget
        """Remove a job with its files (a refused chain's links made before the refusal)."""
        self._cancel_on_cluster = cancel_on_cluster
        self.releaser = Releaser(
            store,
            self.jobs,
            start=start_stored,
            cancel=self.cancel,
            owner=owner,
            gates=[AfterGate(native=native)],
        )
        """The hold engine (`core/holds.py`): other gates join with `releaser.add_gate`."""

    # -- at submit -------------------------------------------------------------------------
    def check(self, spec: JobSpec) -> None:
        """What the spec waits for is the user's, here, and can still be waited for."""
        if spec.after:
            orchestrator, cluster = self.scope()
            check_after(
                spec, self.jobs, user=self.jobs.user, orchestrator=orchestrator, cluster=cluster
            )

    def dependency(self, spec: JobSpec) -> tuple[tuple[str, ...], bool]:
        """The cluster ids a backend that holds jobs itself waits for, and afterany."""
        if not (spec.after and self.native()):
            return (), False
        found = cluster_dependency(spec, self.jobs)
        return (found.backend_ids, found.any) if found else ((), spec.after_any)

    def verdict(self, job: Job) -> Verdict:
        """Whether a new job (not stored yet, `held` set as if held) starts now, waits, or can
        never start (then the submit is refused: nothing is created)."""
        verdict = self.releaser.judge(job.model_copy(update={"held": "new"}))
        if verdict.kind == "doomed":
            raise InvalidRequest(f"the job cannot start: {verdict.reason}", field="after")
        return verdict

    def hold(self, job: Job, reason: str) -> Job:
        """The stored new job, held: its reason shown as its state_reason too."""
        self.store.update(job.id, held=reason, state_reason=reason)
        return job.model_copy(update={"held": reason, "state_reason": reason})

    def refresh(self, jobs: Sequence[Job]) -> None:
        """After a status refresh (the tracker's thread): release, doom, update the waits."""
        self.releaser.refresh(jobs)

    def cancel(self, job: Job, reason: str) -> None:
        """End a job CANCELLED with the reason: a held one in the store only (its hold claimed
        by the caller), a started one on the cluster too."""
        if job.held is not None:
            self.store.update(
                job.id,
                state=JobState.CANCELLED,
                state_reason=reason,
                ended=time.time(),
                held=None,
                events=[*job.events, f"cancelled: {reason}"],
            )
        else:
            self._cancel_on_cluster(job, reason)

    def cancel_held(self, job: Job, reason: str = "cancelled before it started") -> Job | None:
        """The user's cancel of a held job (None when it is not held: cancel it on the cluster)."""
        if job.held is None or not self.store.claim_held(job.id, self.owner):
            return None
        self.cancel(job, reason)
        return self.jobs.record(job.id)

    # -- a chain ---------------------------------------------------------------------------
    def submit_chain(self, request: ChainRequest) -> ChainSubmitted:
        """Every link, earlier links first; each later link waits for its `after` and gets the
        earlier links' values it names (`{{key.param}}`). The chain's shape (keys, cycles,
        references) and the jobs it names are checked first, and each link without references
        is built and checked; a link refused later removes the links made before it (cancelled,
        forgotten with their files): a refused chain leaves nothing."""
        order = plan_chain(request)
        orchestrator, cluster = self.scope()
        for link in order:
            if link.after_ids:
                check_after(
                    JobSpec(
                        name="check",
                        command=["check"],
                        after=link.after_ids,
                        after_any=link.after_any,
                    ),
                    self.jobs,
                    user=self.jobs.user,
                    orchestrator=orchestrator,
                    cluster=cluster,
                )
            if not has_references(link.body):
                try:
                    self.spec_from_body(
                        link_body(link, {key: f"{key}-000000" for key in link.after_keys})
                    )
                except HyperPodError as error:
                    raise type(error)(
                        f"link '{link.key}': {error.message}", field=error.field
                    ) from None
        ids: dict[str, str] = {}
        outputs: dict[str, dict[str, Any]] = {}
        started: list[Job] = []
        try:
            for link in order:
                try:
                    body = fill_references(link_body(link, ids), outputs)
                    job = self.start_spec(self.spec_from_body(body), None)
                except HyperPodError as error:
                    raise type(error)(
                        f"link '{link.key}': {error.message}", field=error.field
                    ) from None
                ids[link.key] = job.id
                outputs[link.key] = outputs_of(job)
                started.append(job)
        except BaseException:
            for job in reversed(started):
                self.forget(job.id)
            raise
        return ChainSubmitted(jobs=started)

    def chain(self, job: Job) -> JobChain:
        return chain_of(job, self.jobs.record, self.jobs.dependents)

    def resume(self, job: Job, *, with_changes: bool = False) -> ChainSubmitted:
        """A new run of the failed link and of every link that waited on it (not succeeded),
        each waiting for the new runs instead of the old ones."""
        plan = resume_plan(job, self.jobs.dependents)
        for link in plan:  # still waiting on the failed run: replaced by its new run
            if not link.state.finished:
                current = self.jobs.record(link.id)
                if current is not None and current.held is not None:
                    self.cancel_held(current, f"replaced by a resume of the chain from {job.id}")
                elif current is not None:
                    self._cancel_on_cluster(
                        current, f"replaced by a resume of the chain from {job.id}"
                    )
        renamed: dict[str, str] = {}
        started: list[Job] = []
        for link in plan:
            after = [renamed.get(job_id, job_id) for job_id in link.spec.after]
            spec = JobSpec.model_validate({**link.spec.model_dump(), "after": after})
            new = self.start_spec(spec, None if with_changes else link.id)
            renamed[link.id] = new.id
            started.append(new)
        return ChainSubmitted(jobs=started)


def need(job: Job | None, job_id: str) -> Job:
    if job is None:
        raise NotFound(f"no job '{job_id}' on this cluster", field="id")
    return job
