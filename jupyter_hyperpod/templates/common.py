"""Form fields that every template shares: resources and scheduling, the same wording everywhere."""

from __future__ import annotations

from typing import Any

from ..core.models import TemplateParam

NODES = TemplateParam(
    name="nodes",
    title="Nodes",
    type="integer",
    default=1,
    minimum=1,
    maximum=4096,
    group="resources",
)
PROCS_PER_NODE = TemplateParam(
    name="procs_per_node",
    title="Processes per node",
    type="integer",
    default=1,
    minimum=1,
    maximum=256,
    group="resources",
    description="Ranks per node (usually one per GPU)",
)
GPUS_PER_NODE = TemplateParam(
    name="gpus_per_node",
    title="GPUs per node",
    type="integer",
    default=0,
    minimum=0,
    maximum=64,
    group="resources",
)
ENV = TemplateParam(
    name="env",
    title="Environment",
    type="text",
    default="",
    group="advanced",
    description="One NAME=value per line (e.g. HF_TOKEN=...)",
)
TIME_LIMIT = TemplateParam(
    name="time_limit_minutes",
    title="Time limit (minutes)",
    type="integer",
    minimum=1,
    group="advanced",
)
QUEUE = TemplateParam(
    name="queue", title="Queue / Slurm partition", type="string", group="advanced"
)
IMAGE = TemplateParam(
    name="image",
    title="Container image",
    type="string",
    group="advanced",
    description="Kubernetes only",
)


def scheduling_fields(params: dict[str, Any]) -> dict[str, Any]:
    """The JobSpec fields that TIME_LIMIT, QUEUE and IMAGE fill (empty form values mean unset)."""
    return {
        "time_limit_minutes": params.get("time_limit_minutes"),
        "queue": params.get("queue") or None,
        "image": params.get("image") or None,
    }
