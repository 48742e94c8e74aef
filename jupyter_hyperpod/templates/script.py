"""`script`: run a script or program from the partition on one or more nodes."""

from __future__ import annotations

import posixpath
import shlex
from typing import Any

from ..core.errors import InvalidRequest
from ..core.models import JobSpec, TemplateInfo, TemplateParam
from .base import Template, TemplateContext
from .common import (
    ENV,
    GPUS_PER_NODE,
    IMAGE,
    NODES,
    PROCS_PER_NODE,
    QUEUE,
    TIME_LIMIT,
    scheduling_fields,
)

PARAMS = [
    TemplateParam(
        name="script",
        title="Script",
        type="path",
        required=True,
        must_exist=True,
        program=True,
        group="job",
        description="Script or program in the partition, e.g. project/train.py",
    ),
    TemplateParam(
        name="args",
        title="Arguments",
        type="string",
        default="",
        group="job",
        description="Arguments as you would type them in a shell (quotes respected, never run by a shell)",
    ),
    NODES,
    PROCS_PER_NODE,
    GPUS_PER_NODE,
    ENV,
    TIME_LIMIT,
    QUEUE,
    IMAGE,
]


def parse_env_lines(text: str, field: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise InvalidRequest(f"line {number} of the environment needs NAME=value", field=field)
        env[name.strip()] = value
    return env


def split_args(text: str, field: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as error:
        raise InvalidRequest(f"arguments cannot be parsed: {error}", field=field) from None


def build(name: str, params: dict[str, Any], context: TemplateContext) -> JobSpec:
    script = posixpath.normpath(str(params["script"]).lstrip("/"))
    workdir, program = posixpath.split(script)
    if not program.endswith(".py") and "/" not in program:
        program = f"./{program}"
    return JobSpec(
        name=name,
        command=[program, *split_args(params["args"] or "", "params.args")],
        workdir=workdir,
        nodes=params["nodes"],
        procs_per_node=params["procs_per_node"],
        gpus_per_node=params["gpus_per_node"],
        env=parse_env_lines(params["env"] or "", "params.env"),
        **scheduling_fields(params),
    )


TEMPLATE = Template(
    info=TemplateInfo(
        name="script",
        title="Run a script",
        description="Run a Python script or a program from your partition on the cluster, one process per rank.",
        params=PARAMS,
    ),
    build=build,
)
