"""`evaluate`: ROUGE-1/2/L/Lsum of the fine-tuned model vs its base model on the test split.

Runs `python -m jupyter_hyperpod.training evaluate --config <file>` with the training job's
config: the merged model (or base + adapter) against the base, both in full precision, as the
seed's evaluation does; logs into that training job's MLflow run.
"""

from __future__ import annotations

from typing import Any

from ..core.models import JobSpec, TemplateInfo, TemplateParam
from .base import Template, TemplateContext
from .common import scheduling_fields
from .qlora import (
    ADVANCED_PARAMS,
    CONFIG_PARAM,
    RESOURCE_PARAMS,
    TRAINING_MODULE,
    config_defaults,
    config_location,
    gpus,
    job_env,
    override_args,
    read_config,
)

EVAL_OVERRIDES = [
    TemplateParam(
        name="output_dir",
        title="Training output directory",
        type="path",
        group="training",
        description="Where the training job wrote its adapter (overrides the config)",
    ),
    TemplateParam(
        name="eval_max_samples",
        title="Test examples",
        type="integer",
        minimum=1,
        group="training",
        description="Evaluate the first N test examples",
    ),
    TemplateParam(
        name="max_new_tokens",
        title="Max new tokens",
        type="integer",
        minimum=1,
        maximum=32768,
        group="training",
        description="Generation length (default: the longest test answer + 10%, so that long "
        "reasoning is not cut)",
    ),
    TemplateParam(
        name="eval_base", title="Also score the base model", type="boolean", group="training"
    ),
    TemplateParam(
        name="per_device_eval_batch_size",
        title="Batch size",
        type="integer",
        minimum=1,
        group="training",
    ),
]

PARAMS = [CONFIG_PARAM, *EVAL_OVERRIDES, *RESOURCE_PARAMS, *ADVANCED_PARAMS]


def build(name: str, params: dict[str, Any], context: TemplateContext) -> JobSpec:
    workdir, config_name = config_location(params)
    config = read_config(context, params)
    return JobSpec(
        name=name,
        command=[
            context.python,
            "-m",
            TRAINING_MODULE,
            "evaluate",
            "--config",
            config_name,
            *override_args(EVAL_OVERRIDES, params, workdir),
        ],
        workdir=workdir,
        nodes=params["nodes"],
        procs_per_node=params["procs_per_node"],
        gpus_per_node=gpus(params, context),
        efa_per_node=params["efa_per_node"],
        env=job_env(params, config),
        **scheduling_fields(params),
    )


TEMPLATE = Template(
    info=TemplateInfo(
        name="evaluate",
        title="Evaluate (ROUGE)",
        description="ROUGE-1/2/L/Lsum of the fine-tuned model (merged, or base + adapter) and "
        "of the base model, both in full precision, on the test split (greedy decoding, long "
        "enough for the longest answer), written as JSON and logged to the training run in "
        "MLflow.",
        params=PARAMS,
    ),
    build=build,
    defaults=lambda params, context: config_defaults(EVAL_OVERRIDES, params, context),
)
