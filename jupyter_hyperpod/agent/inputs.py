"""The input of each agent tool, as the REST route takes it: its query and path parameters as
fields (same names, bounds and defaults as `openapi.py` documents them), a request body as the
very models REST validates (`JobSpec` or `TemplateSubmission`). Fields that only an agent
gives (a preview token, how long to follow) are named in the tool table (`tools.py`), so that
`tests/agent/test_contract.py` finds every difference between a tool and its route."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from ..core.partition import MAX_PAGE, MAX_TEXT_FILE, SORT_KEYS
from ..core.service import MAX_TAIL_LINES

SPEC_MODELS = ("JobSpec", "TemplateSubmission")
SPEC_SCHEMA: dict[str, Any] = {
    "oneOf": [{"$ref": f"#/$defs/{name}"} for name in SPEC_MODELS],
    "description": "A job spec (name, command, workdir, nodes...) or a template submission "
    "(name, template, params), exactly as POST jobs takes it",
}
SPEC_PLACEHOLDER: dict[str, Any] = {"type": "object", "x-hyperpod-spec": True}
"""What pydantic writes for `spec` (it cannot resolve the refs above): `tools.input_schema`
puts SPEC_SCHEMA and the models' schemas in its place."""

JobId = Annotated[str, Field(min_length=1, max_length=63, description="The job id")]
Spec = Annotated[dict[str, Any], WithJsonSchema(SPEC_PLACEHOLDER)]
"""Validated by the core as REST validates the body (same messages), not here."""


class ToolInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoInput(ToolInput):
    pass


class FilesInput(ToolInput):
    path: str = Field("", description="Relative to the partition root")
    offset: int = Field(0, ge=0, description="First entry")
    limit: int = Field(500, ge=1, le=MAX_PAGE, description="Page size")
    sort: Literal[SORT_KEYS] = Field(  # type: ignore[valid-type]
        "name", description="Sort key, '-' for descending"
    )


class ReadFileInput(ToolInput):
    path: str = Field(description="Relative to the partition root")
    limit: int = Field(65536, ge=1, le=MAX_TEXT_FILE, description="The most bytes read")


class RenderInput(ToolInput):
    spec: Spec


class SubmitInput(ToolInput):
    spec: Spec
    preview_token: str = Field(
        "",
        max_length=200,
        description="The preview_token that `render` returned for this very spec",
    )


class JobsInput(ToolInput):
    state: str = Field(
        "", description="Comma-separated states to keep (PENDING, RUNNING, SUCCEEDED...)"
    )
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0)


class JobInput(ToolInput):
    job_id: JobId


class LogsInput(ToolInput):
    job_id: JobId
    rank: int = Field(0, ge=0)
    tail: int = Field(200, ge=0, le=MAX_TAIL_LINES, description="Lines")
    follow_seconds: float = Field(
        0,
        ge=0,
        le=120,
        description="Then follow the live log this long at most (it stops when the job ends)",
    )
    offset: int | None = Field(
        None,
        ge=0,
        description="Continue from this byte (the `offset` of the last answer) instead of "
        "the last lines",
    )


class WhyInput(ToolInput):
    job_id: JobId
    lines: int = Field(40, ge=1, le=2000, description="Lines of the failed rank's log")


class QueueInput(ToolInput):
    mine: bool = Field(False, description="Only my jobs")
    state: str = Field(
        "", description="Comma-separated states; '' = PENDING,RUNNING; 'all' = every state"
    )
    queue: str = Field("", description="Only this partition, queue or namespace")
    offset: int = Field(0, ge=0)
    limit: int = Field(100, ge=1, le=1000)
    refresh: bool = Field(False, description="Ask the cluster now, not a snapshot of the last 2 s")


class CancelInput(ToolInput):
    job_id: JobId
    name: str = Field(description="The job's name, to confirm which job is cancelled")


__all__ = [
    "SPEC_MODELS",
    "CancelInput",
    "FilesInput",
    "JobInput",
    "JobsInput",
    "LogsInput",
    "NoInput",
    "QueueInput",
    "ReadFileInput",
    "RenderInput",
    "SubmitInput",
    "ToolInput",
    "WhyInput",
]
