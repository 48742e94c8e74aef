"""One spec, every entry point: the same inputs through REST (as the panel sends them), the Python
client, `jupyter hyperpod` and `%hyperpod` give the same stored job spec, with no field the user
did not set; resubmitting a stored spec reproduces it exactly."""

from __future__ import annotations

import asyncio
import functools
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.client import HyperPodClient

from ..helpers import Api
from .test_cli import job_id_of, run_async

pytestmark = pytest.mark.timeout(120)

CONFIG = textwrap.dedent(
    """
    model_id: model/base
    output_dir: out
    max_steps: 7
    learning_rate: 0.0003
    packing: true
    merge_weights: true
    eval_base: false
    """
)


@pytest.fixture
def config_file(partition: Path) -> str:
    project = partition / "ft"
    (project / "model" / "base").mkdir(parents=True)
    (project / "args.yaml").write_text(CONFIG)
    return "ft/args.yaml"


def without_name(spec: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in spec.items() if key != "name"}


async def off_loop(function: Any, *args: Any, **kwargs: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(
        None, functools.partial(function, *args, **kwargs)
    )


async def test_rest_client_cli_and_magics_store_the_same_spec(
    api: Api, jp_serverapp: Any, jupyter_env: dict[str, str], shell: Any, config_file: str
) -> None:
    # The panel sends only what the user touched (here: the config, the LoRA rank).
    params = {"config": config_file, "lora_r": 16}
    overrides = {"launcher": "plain"}
    rest = await api.submit(
        {"name": "ft", "template": "qlora-finetune", "params": params, "overrides": overrides}
    )

    client = HyperPodClient(jp_serverapp.connection_url, jp_serverapp.identity_provider.token)
    by_client = await off_loop(
        client.submit, name="ft", template="qlora-finetune", params=params, overrides=overrides
    )

    line = f"submit --template qlora-finetune --set config={config_file} --set lora_r=16 --launcher plain --name ft"
    url = ["--url", jp_serverapp.connection_url, "--token", jp_serverapp.identity_provider.token]
    code, out, err = await run_async(
        jupyter_env, sys.executable, "-m", "jupyter_hyperpod.cli", *line.split(), *url
    )
    assert code == 0, err
    by_cli = job_id_of(out)

    by_magic = shell.run_line_magic("hyperpod", line)

    specs = []
    for job_id in (rest["id"], by_client.id, by_cli, by_magic.id):
        reply = await api.get(f"jobs/{job_id}")
        assert reply.status == 200, reply.body
        specs.append(without_name(reply.body["spec"]))
    assert specs[1:] == [specs[0]] * 3, specs

    spec = specs[0]
    # Nothing the user left alone is passed to the training module: the config decides.
    assert spec["command"][1:] == [
        "-m",
        "jupyter_hyperpod.training",
        "train",
        "--config",
        "args.yaml",
        "--set",
        "lora_r=16",
    ]
    assert spec["launcher"] == "plain" and spec["overrides"] == {"launcher": "plain"}
    assert spec["workdir"] == "ft" and spec["auto_resume"] is True

    # Resubmit (what the panel's Resubmit sends): the stored template, params and overrides.
    again = await api.submit(
        {
            "name": "ft-2",
            "template": spec["template"],
            "params": spec["params"],
            "overrides": spec["overrides"],
        }
    )
    assert without_name(again["spec"]) == spec
    for job_id in (rest["id"], by_client.id, by_cli, by_magic.id, again["id"]):
        await api.delete(f"jobs/{job_id}")  # the model is a stand-in: no need to let it fail


async def test_the_preview_shows_the_values_the_config_will_use(api: Api, config_file: str) -> None:
    reply = await api.post(
        "jobs/render",
        {"name": "ft", "template": "qlora-finetune", "params": {"config": config_file}},
    )
    assert reply.status == 200, reply.body
    values = reply.body["values"]
    assert values["max_steps"] == 7 and values["learning_rate"] == 0.0003
    assert values["packing"] is True and values["merge_weights"] is True
    assert values["lora_r"] == 8  # not in the file: the training module's default
    assert values["model_id"] == "ft/model/base" and values["output_dir"] == "ft/out"
    assert values["nodes"] == 1 and values["gpus_per_node"] == 0  # local: no GPU by default
    assert "--set" not in reply.body["spec"]["command"]

    evaluate = await api.post(
        "jobs/render",
        {
            "name": "ev",
            "template": "evaluate",
            "params": {"config": config_file, "max_new_tokens": 32},
        },
    )
    assert evaluate.status == 200, evaluate.body
    assert evaluate.body["values"]["eval_base"] is False
    assert evaluate.body["values"]["max_new_tokens"] == 32
    assert evaluate.body["spec"]["command"][-2:] == ["--set", "max_new_tokens=32"]


async def test_an_override_that_is_not_a_spec_field_names_it(api: Api, config_file: str) -> None:
    reply = await api.post(
        "jobs/render",
        {
            "name": "ft",
            "template": "qlora-finetune",
            "params": {"config": config_file},
            "overrides": {"launcher": "mpirun"},
        },
    )
    assert reply.status == 400 and reply.body["error"]["field"] == "overrides.launcher"
    reply = await api.post(
        "jobs/render",
        {
            "name": "ft",
            "template": "qlora-finetune",
            "params": {"config": config_file},
            "overrides": {"params": {}},
        },
    )
    assert reply.status == 400 and reply.body["error"]["field"] == "overrides.params"
