"""The one API of jupyter-hyperpod: the operations every entry point uses.

`HyperPodService` (the core in this process) and `HyperPodClient` (the REST API of a running
Jupyter server) both implement `HyperPodAPI` with the same signatures and result types, so the
CLI, the magics and scripts take either one and need no adapter. mypy checks both against it
where the CLI opens one or the other as a `HyperPodAPI` (`cli/session.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field, ValidationError

from .byo import AppliedFile
from .chains import ChainSubmitted, JobChain
from .errors import InvalidRequest, validation_error
from .gpu_models import GpuNodes, JobGpu

# The log events of `follow` are the frames of the one log protocol.
from .logprotocol import LogEvent, RankArg
from .models import (
    AwsClusterList,
    AwsConnectRequest,
    ClusterInfo,
    FileListing,
    ForgottenJob,
    Job,
    JobComparison,
    JobDiff,
    JobList,
    JobMetrics,
    JobSpec,
    JobState,
    LogSnapshot,
    Node,
    Rendered,
    StackDump,
    TemplateInfo,
)
from .queue import QueueLogs, QueuePage
from .sweeps import Sweep, SweepList

SubmitBody = JobSpec | Mapping[str, Any]
"""A full job spec, or a template submission `{name, template, params}` (as REST takes them)."""


CheckStatus = Literal["pass", "warn", "fail", "skip"]


class DiagnosticCheck(BaseModel):
    """One check of `diagnose`: what it saw and, when it did not pass, the fix in one line."""

    name: str
    status: CheckStatus
    detail: str
    fix: str = ""


class FileText(BaseModel):
    """A small UTF-8 text file of the partition (`GET files/text`), read through the resolver."""

    path: str = Field(description="Relative to the partition root")
    text: str
    size: int = Field(description="Bytes")


MAX_EVENT_CHARS = 300


class RerunRequest(BaseModel):
    """`POST jobs/{id}/rerun` (#24 item 2)."""

    model_config = {"extra": "forbid"}

    with_changes: bool = Field(
        False,
        description="false: the job's snapshot, exactly what it ran; true: the same spec with "
        "the workdir's files as they are now",
    )


class JobEventRequest(BaseModel):
    """One line to add to a job's events (`POST jobs/{id}/events`): who acted on it, and how."""

    model_config = {"extra": "forbid"}

    event: str = Field(
        min_length=1,
        max_length=MAX_EVENT_CHARS,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description="One line of text, no control characters",
    )


class Diagnosis(BaseModel):
    """Can this machine act as the login node of its cluster? (`GET diagnose`, `doctor`)."""

    ok: bool = Field(description="No check failed")
    orchestrator: str = Field(description="The orchestrator in use (local, slurm, kubernetes)")
    where: str = Field(description="Where the checks ran: the server, or this process")
    checks: list[DiagnosticCheck]


@runtime_checkable
class HyperPodAPI(Protocol):
    """The operations of a HyperPod login node, in this process or through a Jupyter server."""

    @property
    def description(self) -> str:
        """For people: which implementation this is (the server's URL, or the core here)."""
        ...

    def cluster(self) -> ClusterInfo: ...

    def nodes(self) -> list[Node]: ...

    def files(
        self, path: str = "", *, offset: int = 0, limit: int = 500, sort: str = "name"
    ) -> FileListing: ...

    def read_file(self, path: str, *, limit: int = 65536) -> FileText:
        """A small UTF-8 text file of the partition (at most `limit` bytes)."""
        ...

    def templates(self) -> list[TemplateInfo]: ...

    def render(self, spec: SubmitBody | None = None, /, **fields: Any) -> Rendered:
        """What `submit` would send to the cluster (sbatch script, manifest or command)."""
        ...

    def submit(self, spec: SubmitBody | None = None, /, **fields: Any) -> Job:
        """Submit a spec or a template submission; keyword fields are merged into it."""
        ...

    def rerun(self, job_id: str, *, with_changes: bool = False) -> Job:
        """Start a job's spec again, as a new job: from its snapshot (what it ran, exactly), or
        `with_changes` from the workdir's files as they are now."""
        ...

    def submit_chain(self, request: Any) -> ChainSubmitted:
        """Submit a chain (`{"links": [...]}`, `core/chains.ChainRequest`): every link, each
        waiting for the links and jobs its `after` names (#24 item 4)."""
        ...

    def chain(self, job_id: str) -> JobChain:
        """Every job linked to this one by `after`, oldest first."""
        ...

    def resume(self, job_id: str, *, with_changes: bool = False) -> ChainSubmitted:
        """Run a chain again from its failed link: that link and every link that waited on it."""
        ...

    def submit_sweep(self, request: Any) -> Sweep:
        """Submit a sweep (`core/sweeps.SweepRequest`: a template, the shared params and each
        swept parameter's values): one job per point, every one checked first (#24 item 3)."""
        ...

    def sweeps(self) -> SweepList:
        """The user's sweeps (group rows: counts, progress, best member), newest first."""
        ...

    def sweep(self, sweep_id: str) -> Sweep:
        """One sweep: its group row and its members, in sweep order."""
        ...

    def cancel_sweep(self, sweep_id: str) -> Sweep:
        """Cancel every unfinished member of a sweep."""
        ...

    def apply(
        self,
        text: str = "",
        /,
        *,
        filename: str = "",
        fix: bool = False,
        dry_run: bool = False,
        resubmit: str | None = None,
    ) -> AppliedFile:
        """Submit the user's own manifest or sbatch script (core/byo.py): checked with the real
        schemas, the admin's policy and the operator's rules; every change marked."""
        ...

    def jobs(
        self, *, states: Sequence[JobState] | None = None, limit: int = 100, offset: int = 0
    ) -> JobList: ...

    def job(self, job_id: str) -> Job: ...

    def cancel(self, job_id: str) -> Job:
        """Cancel a job (a finished job is returned as it is)."""
        ...

    def add_event(self, job_id: str, event: str) -> Job:
        """Add one line to the job's events (who acted on it: an agent via MCP)."""
        ...

    def forget(self, job_id: str, *, delete_files: bool = False) -> ForgottenJob:
        """Remove a job from the history, cancelled first if it still runs; its directory
        (`.hyperpod/jobs/<id>`) is deleted only when asked, its outputs never."""
        ...

    def logs(self, job_id: str, *, rank: int = 0, tail: int = 200) -> LogSnapshot:
        """The last `tail` lines of a rank's log, with the offset to follow from."""
        ...

    def follow(
        self,
        job_id: str,
        *,
        rank: RankArg = 0,
        offset: int = 0,
        offsets: Mapping[int, int] | None = None,
    ) -> Iterator[LogEvent]:
        """The live log until the job ends (the last event is `end`); closing the iterator only
        stops following, never the job."""
        ...

    def metrics(self, job_id: str) -> JobMetrics: ...

    def diff(self, job_id: str, other_id: str) -> JobDiff:
        """What differs between two jobs: spec, resolved configs, code files, packages."""
        ...

    def compare(self, job_ids: Sequence[str]) -> JobComparison:
        """Two to ten jobs side by side: state, duration, what sets them apart, final metrics."""
        ...

    def dump_stacks(self, job_id: str) -> StackDump:
        """py-spy dump of every rank of a running job, differing frames marked; stored with it."""
        ...

    def stacks(self, job_id: str) -> StackDump:
        """The job's last stack dump."""
        ...

    def gpu_nodes(self) -> GpuNodes:
        """Each node's GPUs now (DCGM series, or this machine's); none, with the reason."""
        ...

    def job_gpu(self, job_id: str, *, step: float | None = None) -> JobGpu:
        """The job's GPU utilisation and memory over its run."""
        ...

    def aws_clusters(self, region: str | None = None) -> AwsClusterList:
        """The HyperPod clusters of the region, each connectable or with the reason why not."""
        ...

    def connect(
        self,
        cluster: str,
        *,
        region: str | None = None,
        namespace: str | None = None,
        auth: Literal["exec", "token"] = "exec",
        slurm: bool = False,
        controller_group: str | None = None,
    ) -> ClusterInfo:
        """Write the kubeconfig context of an EKS HyperPod cluster and switch to it; with
        `slurm`, make this machine a login node of a Slurm one (details.login_node: each step)."""
        ...

    def diagnose(self) -> Diagnosis:
        """The login-node checks of the orchestrator in use, run where the core runs."""
        ...

    def queue(
        self,
        *,
        mine: bool = False,
        state: str | list[str] | None = "",
        partition: str | None = None,
        offset: int = 0,
        limit: int = 100,
        fresh: bool = False,
    ) -> QueuePage:
        """A page of the cluster's queue: every user's jobs (core/queue.py)."""
        ...

    def adopt(self, queue_id: str) -> Job:
        """Open one of my jobs submitted elsewhere like a job submitted here."""
        ...

    def queue_logs(self, queue_id: str, *, tail: int = 200) -> QueueLogs:
        """A queue row's log, only where the cluster lets this user read it."""
        ...

    def close(self) -> None: ...


def request_body(spec: SubmitBody | None, fields: Mapping[str, Any]) -> Any:
    """One request body from a spec (model or mapping) and keyword fields. Anything else (a
    REST body that is not a JSON object) is passed on as it is, for the core to refuse."""
    if isinstance(spec, JobSpec):
        return {**spec.model_dump(mode="json", exclude_none=True), **fields}
    if spec is None:
        return dict(fields) if fields else None
    if isinstance(spec, Mapping):
        return {**spec, **fields} if fields else spec
    return spec


def connect_request(body: Any) -> AwsConnectRequest:
    """The body of `POST aws/connect` (and the arguments of `connect`), validated."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    try:
        return AwsConnectRequest.model_validate(
            {key: value for key, value in body.items() if value is not None}
        )
    except ValidationError as error:
        raise validation_error(error) from None


def log_text(
    api: HyperPodAPI, job_id: str, *, rank: int = 0, tail: int = 200, follow: bool = False
) -> Iterator[str]:
    """The last `tail` lines of a rank's log; with follow, then everything new until the job ends."""
    snapshot = api.logs(job_id, rank=rank, tail=tail)
    if snapshot.text:
        yield snapshot.text
    if follow:
        events = api.follow(job_id, rank=rank, offset=snapshot.offset)
        try:
            for event in events:
                if event.type == "data" and event.data:
                    yield event.data
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()


__all__ = [
    "CheckStatus",
    "Diagnosis",
    "DiagnosticCheck",
    "FileText",
    "HyperPodAPI",
    "JobEventRequest",
    "LogEvent",
    "RankArg",
    "RerunRequest",
    "SubmitBody",
    "connect_request",
    "log_text",
    "request_body",
]
