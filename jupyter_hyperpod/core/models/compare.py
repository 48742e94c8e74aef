"""Comparing jobs (#24 item 2: `GET jobs/{a}/diff/{b}`, `GET compare?ids=`): what differs in
their specs, configs, code and environment, and their outcomes side by side."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .common import JobState
from .metrics import EvaluationMetrics, MetricPoint


class ValueChange(BaseModel):
    """One field, or one config value, that differs between two jobs."""

    field: str = Field(description="Dotted path: 'env.LR', 'resources.nodes', 'lora.r'")
    a: Any = Field(None, description="Its value in the first job (null: absent)")
    b: Any = Field(None, description="Its value in the second job (null: absent)")


ChangeKind = Literal["added", "removed", "changed"]


class ConfigChange(BaseModel):
    """A resolved config file (`${VAR}` expanded, `--set` applied) that differs."""

    name: str = Field(description="The config's path, relative to the workdir")
    status: ChangeKind
    values: list[ValueChange] = Field(
        default_factory=list, description="The values that differ (YAML mappings, flattened)"
    )
    diff: str = Field("", description="Unified diff of the two resolved texts")


class CodeFileChange(BaseModel):
    """A snapshot file added, removed or changed (by SHA-256) between two jobs."""

    path: str = Field(description="Relative to the workdir")
    status: ChangeKind
    a_sha256: str | None = None
    b_sha256: str | None = None
    a_size: int | None = None
    b_size: int | None = None
    diff: str | None = Field(
        None, description="Unified diff (text files under the size cap); null: see note"
    )
    note: str | None = Field(None, description="Why no diff is shown (binary, too large)")


class CodeSide(BaseModel):
    """What one job ran, in short."""

    commit: str | None = None
    dirty: bool = False
    files: int = 0
    bytes: int = 0


class CodeDiff(BaseModel):
    a: CodeSide | None = Field(None, description="Null: the job has no snapshot")
    b: CodeSide | None = None
    files: list[CodeFileChange] = Field(default_factory=list)
    unchanged: int = Field(0, description="Files the same in both")


class PackageChange(BaseModel):
    name: str = Field(description="The package, as pip freeze names it")
    status: ChangeKind
    a: str | None = Field(None, description="Its version (or pip's requirement line) in a")
    b: str | None = None


class EnvironmentDiff(BaseModel):
    a_sha256: str | None = Field(None, description="SHA-256 of a's pip freeze (null: unknown)")
    b_sha256: str | None = None
    same: bool = Field(description="Both known and identical")
    packages: list[PackageChange] = Field(default_factory=list)


class JobDiff(BaseModel):
    """Two jobs side by side: what differs in their spec, configs, code and environment."""

    a: str = Field(description="The first job's id")
    b: str = Field(description="The second job's id")
    spec: list[ValueChange] = Field(default_factory=list)
    configs: list[ConfigChange] = Field(default_factory=list)
    code: CodeDiff
    environment: EnvironmentDiff
    notes: list[str] = Field(
        default_factory=list, description="What could not be compared, and why"
    )


class ComparedJob(BaseModel):
    """One job of a comparison: its outcome, what sets it apart, its final metrics."""

    id: str
    name: str
    state: JobState
    created: float
    duration: float | None = Field(None, description="Seconds from start to end (or to now)")
    exit_code: int | None = None
    commit: str | None = None
    dirty: bool = False
    values: dict[str, Any] = Field(
        default_factory=dict,
        description="Its value of each field in JobComparison.differing (null: absent)",
    )
    final_metrics: dict[str, MetricPoint] = Field(
        default_factory=dict, description="Each MLflow metric's last point (highest step)"
    )
    evaluation: EvaluationMetrics | None = None
    metrics_message: str | None = Field(None, description="Why no metrics, when none")


class JobComparison(BaseModel):
    """Two or more jobs side by side."""

    jobs: list[ComparedJob]
    differing: list[str] = Field(
        default_factory=list,
        description="Spec fields ('resources.nodes') and config values ('train.yaml:lora.r') "
        "that are not the same in every job",
    )
    metrics: list[str] = Field(
        default_factory=list, description="Every final metric any of the jobs has, sorted"
    )
    notes: list[str] = Field(default_factory=list)
