"""`qlora-finetune`: QLoRA/LoRA fine-tuning with `jupyter_hyperpod.training` from a YAML config.

The job runs `python -m jupyter_hyperpod.training train --config <file>` in the config's
directory, once per rank (the backend starts the ranks: torchrun on Slurm/Kubernetes, one process
per rank locally). Form fields override config keys; paths stay partition-relative (rewritten
relative to the config's directory, where the job runs), so they are valid on every backend.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

from ..core.errors import InvalidRequest
from ..core.models import JobSpec, TemplateInfo, TemplateParam
from ..core.partition import read_yaml
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
from .script import parse_env_lines

TRAINING_MODULE = "jupyter_hyperpod.training"

CONFIG_PARAM = TemplateParam(
    name="config",
    title="Config file",
    type="path",
    required=True,
    group="job",
    must_exist=True,
    description="YAML config in your partition (the seed's args-fine-tuning.yaml works as is; "
    "`python -m jupyter_hyperpod.training scaffold <dir>` writes one)",
)

RESOURCE_PARAMS = [
    NODES,
    PROCS_PER_NODE,
    GPUS_PER_NODE.model_copy(
        update={
            "default": None,
            "description": "Default: one per process on Slurm and Kubernetes, none locally",
        }
    ),
    TemplateParam(
        name="efa_per_node",
        title="EFA interfaces per node",
        type="integer",
        default=0,
        minimum=0,
        maximum=32,
        group="resources",
        description="Kubernetes only",
    ),
]

ADVANCED_PARAMS = [
    ENV,
    TIME_LIMIT,
    QUEUE,
    IMAGE.model_copy(
        update={
            "description": "Kubernetes only: an image with jupyter-hyperpod[training] installed"
        }
    ),
]

# Form field -> config key; type "path" values are rewritten relative to the config's directory.
TRAIN_OVERRIDES = [
    TemplateParam(
        name="model_id",
        title="Base model",
        type="path",
        group="training",
        description="Model directory in the partition (overrides the config)",
    ),
    TemplateParam(
        name="dataset",
        title="Dataset",
        type="path",
        group="training",
        description="JSON/JSONL/Parquet file to prepare (overrides the config)",
    ),
    TemplateParam(name="output_dir", title="Output directory", type="path", group="training"),
    TemplateParam(name="max_steps", title="Max steps", type="integer", minimum=1, group="training"),
    TemplateParam(
        name="num_train_epochs", title="Epochs", type="number", minimum=0.01, group="training"
    ),
    TemplateParam(
        name="learning_rate", title="Learning rate", type="number", minimum=0, group="training"
    ),
    TemplateParam(
        name="lora_r", title="LoRA rank", type="integer", minimum=1, maximum=1024, group="training"
    ),
    TemplateParam(
        name="quantization",
        title="Quantization",
        type="choice",
        choices=["auto", "nf4", "none"],
        group="training",
        description="nf4: QLoRA; none: LoRA on the full-precision model",
    ),
    TemplateParam(
        name="save_steps",
        title="Checkpoint every N steps",
        type="integer",
        minimum=0,
        group="training",
    ),
    TemplateParam(
        name="packing",
        title="Sequence packing",
        type="boolean",
        group="training",
        description="Off (the seed's way, the config's default): one example per row, as many "
        "rows per epoch as examples. On: several examples share each row of max_seq_length "
        "tokens (2048 if unset), each still seeing only itself: fewer, fuller rows, so fewer "
        "steps per epoch and much less padding",
    ),
    TemplateParam(
        name="merge_weights", title="Merge adapter at the end", type="boolean", group="training"
    ),
]

PARAMS = [
    CONFIG_PARAM,
    *TRAIN_OVERRIDES,
    *RESOURCE_PARAMS,
    TemplateParam(
        name="auto_resume",
        title="Auto-resume",
        type="boolean",
        default=True,
        group="resources",
        description="Restart on node failure; training resumes from its last checkpoint",
    ),
    TemplateParam(
        name="max_retries",
        title="Max restarts",
        type="integer",
        default=3,
        minimum=0,
        maximum=100,
        group="resources",
    ),
    TemplateParam(
        name="healthy_nodes_only",
        title="Health-checked nodes only",
        type="boolean",
        default=False,
        group="resources",
    ),
    TemplateParam(
        name="kind",
        title="Kubernetes job kind",
        type="choice",
        choices=["PyTorchJob", "HyperPodPyTorchJob"],
        group="advanced",
    ),
    *ADVANCED_PARAMS,
]


def config_location(params: dict[str, Any]) -> tuple[str, str]:
    """(workdir, file name) of the config, partition-relative."""
    path = posixpath.normpath(str(params["config"]).strip().lstrip("/"))
    if path.startswith("..") or path in (".", ""):
        raise InvalidRequest(
            "the config must be a file inside your partition", field="params.config"
        )
    workdir, name = posixpath.split(path)
    return workdir, name


def read_config(context: TemplateContext, params: dict[str, Any]) -> dict[str, Any]:
    """The YAML as written (checked now so that a wrong path fails in the form, not on the cluster)."""
    # Through the partition resolver; a YAML error names the line, never quotes the file.
    data = read_yaml(context.partition, str(params["config"]), field="params.config") or {}
    if not isinstance(data, dict):
        raise InvalidRequest("config file must be a YAML mapping", field="params.config")
    return data


def override_args(declared: list[TemplateParam], params: dict[str, Any], workdir: str) -> list[str]:
    """`--set key=value` for each form field given; paths relative to the job's workdir."""
    args: list[str] = []
    for param in declared:
        value = params.get(param.name)
        if value is None or value == "":
            continue
        if param.type == "path":
            target = posixpath.normpath(str(value).strip().lstrip("/"))
            value = posixpath.relpath(target, workdir or ".")
        elif param.type == "boolean":
            value = "true" if value else "false"
        args += ["--set", f"{param.name}={value}"]
    return args


def config_defaults(
    declared: list[TemplateParam], params: dict[str, Any], context: TemplateContext
) -> dict[str, Any]:
    """What the training module will use for each override left unset: the config file's value,
    else `TrainingConfig`'s default (paths partition-relative, as the form shows them)."""
    import dataclasses

    from ..training.config import TrainingConfig

    defaults = {
        item.name: item.default
        for item in dataclasses.fields(TrainingConfig)
        if item.default is not dataclasses.MISSING
    }
    workdir, _ = config_location(params)
    config = read_config(context, params)
    values: dict[str, Any] = {"gpus_per_node": gpus(params, context)}
    for param in declared:
        value = config.get(param.name, defaults.get(param.name))
        if param.type == "path" and isinstance(value, str) and value:
            # A hub id ('org/name') with nothing at that path stays as written.
            hub = param.name in ("model_id", "dataset") and not config.get("model_source")
            if not value.startswith(("/", "~")) and (
                not hub or (Path(context.partition) / workdir / value).exists()
            ):
                value = posixpath.normpath(posixpath.join(workdir, value))
        values[param.name] = value
    return values


def job_env(params: dict[str, Any], config: dict[str, Any]) -> dict[str, str]:
    env = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    uri = config.get("mlflow_uri")
    # A literal tracking URI in the config is where the run will be: tell the server too.
    if isinstance(uri, str) and uri.strip() and "${" not in uri:
        env["MLFLOW_TRACKING_URI"] = uri.strip()
    env.update(parse_env_lines(params.get("env") or "", "params.env"))
    return env


def gpus(params: dict[str, Any], context: TemplateContext) -> int:
    if params.get("gpus_per_node") is not None:
        return int(params["gpus_per_node"])
    return 0 if context.orchestrator == "local" else int(params.get("procs_per_node") or 1)


def build(name: str, params: dict[str, Any], context: TemplateContext) -> JobSpec:
    workdir, config_name = config_location(params)
    config = read_config(context, params)
    command = [
        context.python,
        "-m",
        TRAINING_MODULE,
        "train",
        "--config",
        config_name,
        *override_args(TRAIN_OVERRIDES, params, workdir),
    ]
    return JobSpec(
        name=name,
        command=command,
        workdir=workdir,
        nodes=params["nodes"],
        procs_per_node=params["procs_per_node"],
        gpus_per_node=gpus(params, context),
        efa_per_node=params["efa_per_node"],
        env=job_env(params, config),
        auto_resume=params["auto_resume"],
        max_retries=params["max_retries"] if params["auto_resume"] else 0,
        healthy_nodes_only=params["healthy_nodes_only"],
        kind=params.get("kind") or None,
        **scheduling_fields(params),
    )


TEMPLATE = Template(
    info=TemplateInfo(
        name="qlora-finetune",
        title="QLoRA fine-tune",
        description="Fine-tune a causal LM with QLoRA (4-bit NF4) or LoRA, FSDP across every rank, "
        "checkpoints and auto-resume, MLflow tracking. Prepares the data first when the config "
        "names a dataset.",
        params=PARAMS,
    ),
    build=build,
    defaults=lambda params, context: config_defaults(TRAIN_OVERRIDES, params, context),
)
