"""What a user submits: one `JobSpec` whatever the orchestrator (pydantic gives field-level
messages for bad input), its watchdog settings, template submissions and parameters, and the
rendered preview of a spec."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from .common import ENV_NAME_PATTERN, JOB_NAME_PATTERN, NODE_NAME_PATTERN, StrictModel

MAX_AFTER = 32
"""Jobs one job may wait for (`JobSpec.after`)."""
JOB_ID_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9]{0,98}[a-z0-9])?$")
"""What `JobSpec.after` accepts: a job id's letters (the store says whether it exists)."""

STEP_PATTERN_HELP = (
    "A regular expression that matches one of the job's step lines: its group 'step' (or its "
    "first group) is the step number; without a group each matching line counts one step"
)


class WatchdogSpec(StrictModel):
    """The job's watchdog (`core/watchdog.py`); a field left null takes the admin's default
    (`c.HyperPodSettings.watchdog_*`). Hang: no new step on any rank for max(hang_factor x the
    median step time, hang_floor_seconds), or no first step within start_cutoff_seconds.
    Straggler: a rank below straggler_fraction of the others' median step rate for
    straggler_windows windows in a row."""

    enabled: bool = Field(True, description="Watch this job at all")
    step_pattern: str | None = Field(
        None, max_length=500, description=STEP_PATTERN_HELP + " (besides the built-in ones)"
    )
    hang_factor: float | None = Field(
        None, gt=0, le=1000, description="k: a hang is k median step times without a step"
    )
    hang_floor_seconds: float | None = Field(
        None, ge=1, le=7 * 86400, description="The shortest hang bound, seconds (at most a week)"
    )
    start_cutoff_seconds: float | None = Field(
        None, ge=1, le=7 * 86400, description="Seconds the first step may take (at most a week)"
    )
    straggler_fraction: float | None = Field(
        None, gt=0, lt=1, description="A straggler steps slower than this share of the others"
    )
    straggler_windows: int | None = Field(
        None, ge=1, le=1000, description="Windows in a row a straggler must stay slow"
    )
    window_seconds: float | None = Field(
        None, ge=0.5, le=86400, description="Length of one step-rate window, seconds"
    )
    auto_cancel_minutes: float | None = Field(
        None,
        gt=0,
        le=7 * 24 * 60,
        description="Cancel the job once it has been stalled this long (null: never)",
    )
    slow_tokens_per_second: int | None = Field(
        None,
        ge=1,
        le=10**9,
        description="HyperPodPyTorchJob: the operator's slow rule, our loop's tokens/s below this",
    )

    @field_validator("step_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"the pattern does not compile: {error}") from None
        return value


class SweepTag(StrictModel):
    """A sweep member's tag (#24 item 3): its group, its point and the group's settings (each
    member carries them, so the group is read from its members alone)."""

    group: str = Field(pattern=JOB_ID_PATTERN.pattern, description="The sweep's id")
    name: str = Field(pattern=JOB_NAME_PATTERN, description="The sweep's name")
    index: int = Field(ge=0, description="The member's place in the sweep, from 0")
    size: int = Field(ge=1, description="Members the sweep was submitted with")
    point: dict[str, Any] = Field(description="The swept parameters' values of this member")
    max_concurrent: int | None = Field(
        None, ge=1, description="Members started at once at most (null: no cap)"
    )
    metric: str = Field("loss", description="The MLflow metric that ranks the members")
    goal: Literal["min", "max"] = Field("min", description="Whether the lowest or highest wins")


class JobSpec(StrictModel):
    """A job, as the panel, the magics, the CLI and the REST API all submit it."""

    name: str = Field(
        pattern=JOB_NAME_PATTERN, description="Lowercase letters, digits and '-' (RFC 1123)"
    )
    command: list[str] = Field(
        min_length=1, description="Program and arguments; a .py program runs with Python"
    )
    workdir: str = Field("", description="Working directory, relative to the partition root")
    nodes: int = Field(1, ge=1, le=4096)
    procs_per_node: int = Field(1, ge=1, le=256, description="Processes (ranks) per node")
    gpus_per_node: int = Field(0, ge=0, le=64)
    env: dict[str, str] = Field(default_factory=dict)
    launcher: Literal["auto", "torchrun", "plain"] = Field(
        "auto",
        description="torchrun starts the ranks (multi-node rendezvous); plain runs the command once per rank "
        "with the torch.distributed variables set; auto picks torchrun on multi-node clusters",
    )
    time_limit_minutes: int | None = Field(None, ge=1, le=60 * 24 * 60)
    queue: str | None = Field(None, description="Slurm partition or Kubernetes queue name")
    priority_class: str | None = Field(
        None,
        pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
        description="Kubernetes task governance: a Kueue WorkloadPriorityClass of the cluster",
    )
    image: str | None = Field(None, description="Container image (Kubernetes)")
    kind: str | None = Field(
        None, description="Kubernetes job kind: PyTorchJob or HyperPodPyTorchJob"
    )
    namespace: str | None = Field(
        None,
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="Kubernetes namespace (one the admin allows)",
    )
    auto_resume: bool = Field(False, description="Restart on node failure (HyperPod auto-resume)")
    max_retries: int = Field(0, ge=0, le=100)
    efa_per_node: int = Field(0, ge=0, le=32)
    healthy_nodes_only: bool = Field(
        False, description="Only schedule on nodes that passed health checks"
    )
    template: str | None = Field(None, description="The template this spec was built from, if any")
    params: dict[str, Any] = Field(default_factory=dict, description="The template parameters used")
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="Spec fields set on top of what the template built (CLI options such as "
        "--launcher): kept so that a resubmit builds the same spec",
    )
    watchdog: WatchdogSpec | None = Field(
        None, description="Hang and straggler detection; null: the admin's defaults"
    )
    exclude_nodes: list[str] = Field(
        default_factory=list,
        max_length=256,
        description="Nodes the job must not run on (Slurm --exclude, Kubernetes nodeAffinity "
        "NotIn): a resubmit without a suspect node",
    )
    after: list[str] = Field(
        default_factory=list,
        max_length=MAX_AFTER,
        description="Job ids this job waits for (a chain, #24): it starts once they succeeded "
        "(or ended, with after_any); a failed one cancels it with the reason",
    )
    after_any: bool = Field(
        False,
        description="With after: start once they ended, whatever their state (Slurm afterany); "
        "false: only when every one succeeded (afterok)",
    )

    sweep: SweepTag | None = Field(
        None, description="The sweep this job is a member of (set by POST sweeps), if any"
    )

    @field_validator("after")
    @classmethod
    def _after_ids(cls, value: list[str]) -> list[str]:
        for job_id in value:
            if not JOB_ID_PATTERN.match(job_id):
                raise ValueError(f"'{job_id[:80]}' is not a job id (such as prepare-1a2b3c)")
        if len(set(value)) != len(value):
            raise ValueError("a job id is named twice")
        return value

    @field_validator("command")
    @classmethod
    def _command_not_blank(cls, value: list[str]) -> list[str]:
        if not value or not value[0].strip():
            raise ValueError("the command needs a program to run")
        if any("\x00" in part for part in value):
            raise ValueError("arguments cannot contain NUL bytes")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not ENV_NAME_PATTERN.match(key):
                raise ValueError(f"'{key}' is not a valid environment variable name")
            if "\x00" in item:
                raise ValueError(f"the value of {key} contains a NUL byte")
        return value

    @field_validator("exclude_nodes")
    @classmethod
    def _node_names(cls, value: list[str]) -> list[str]:
        for node in value:
            if not NODE_NAME_PATTERN.match(node):
                raise ValueError(f"'{node}' is not a node name (letters, digits, '.', '_', '-')")
        return value

    @field_validator("workdir")
    @classmethod
    def _workdir_text(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("the path contains a NUL byte")
        return value

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node


class TemplateSubmission(StrictModel):
    """Submit a job from a template: `params` are checked against the template's parameters."""

    name: str = Field(pattern=JOB_NAME_PATTERN)
    template: str
    params: dict[str, Any] = Field(
        default_factory=dict, description="Only the parameters the user set: the others default"
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="JobSpec fields to set on top of what the template builds (launcher, workdir, "
        "kind, namespace...); env is merged",
    )


class TemplateParam(BaseModel):
    name: str
    title: str
    type: Literal["string", "integer", "number", "boolean", "path", "choice", "text"]
    default: Any = None
    required: bool = False
    description: str = ""
    choices: list[str] | None = None
    minimum: float | None = None
    maximum: float | None = None
    group: str = Field("job", description="Form section: job, resources, training, advanced")
    must_exist: bool = Field(
        False, description="For paths: must name an existing file or directory of the partition"
    )
    program: bool = Field(
        False,
        description="For paths: the program a rank runs: a file, executable unless a .py script",
    )


class TemplateInfo(BaseModel):
    name: str
    title: str
    description: str
    params: list[TemplateParam]


class Rendered(BaseModel):
    format: Literal["command", "sbatch", "manifest"]
    language: Literal["shell", "yaml", "json"]
    text: str = Field(description="Exactly what will be submitted")
    spec: JobSpec = Field(description="The job spec after templates and defaults")
    warnings: list[str] = Field(default_factory=list)
    values: dict[str, Any] = Field(
        default_factory=dict,
        description="For a template: the value each parameter takes (the one given, else the "
        "config file's, else the template's default); null where the program decides",
    )
