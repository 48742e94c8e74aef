"""The templates through the real server on the local backend: submit, train, metrics, evaluate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..helpers import Api
from .conftest import server_running_training, write_config


@pytest.fixture
def hyperpod_config(
    hyperpod_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    # The MLflow UI the panel links to (the tracking store here is sqlite: no UI of its own).
    ui = {"mlflow_ui_url": "http://mlflow.test:5000/"}
    return {**server_running_training(hyperpod_config, monkeypatch), **ui}


async def test_qlora_template_runs_on_two_local_ranks_and_reports_metrics(
    api: Api, partition: Path, tiny_model: Path, dataset_file: Path
) -> None:
    write_config(partition / "proj", model_id=str(tiny_model), dataset=str(dataset_file))

    templates = (await api.get("templates")).body
    names = [
        t["name"] for t in (templates["templates"] if isinstance(templates, dict) else templates)
    ]
    assert {"qlora-finetune", "evaluate"} <= set(names)

    bad = await api.post(
        "jobs",
        {"name": "ft", "template": "qlora-finetune", "params": {"config": "proj/missing.yaml"}},
    )
    assert bad.status == 400 and bad.body["error"]["field"] == "params.config"

    job = await api.submit(
        {
            "name": "ft",
            "template": "qlora-finetune",
            "params": {
                "config": "proj/args-fine-tuning.yaml",
                "max_steps": 12,
                "save_steps": 6,
                "procs_per_node": 2,
                "output_dir": "proj/out",
            },
        }
    )
    assert job["spec"]["command"][1:6] == [
        "-m",
        "jupyter_hyperpod.training",
        "train",
        "--config",
        "args-fine-tuning.yaml",
    ]
    assert "output_dir=out" in job["spec"]["command"]  # partition path made relative to the config
    done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"}, timeout=420)
    log = (await api.get(f"jobs/{job['id']}/logs", rank=0, tail=200)).body["text"]
    assert done["state"] == "SUCCEEDED", log
    assert "step 12/12 | loss" in log

    summary = json.loads((partition / "proj" / "out" / "train_results.json").read_text())
    assert summary["parallelism"] == "fsdp" and summary["world_size"] == 2

    reply = await api.get(f"jobs/{job['id']}/metrics")
    assert reply.status == 200, reply.body
    metrics = reply.body
    assert metrics["run"] is not None, metrics.get("message")
    assert [p["step"] for p in metrics["metrics"]["loss"]] == list(range(1, 13))
    assert metrics["metrics"]["loss"][-1]["value"] < metrics["metrics"]["loss"][0]["value"]

    evaluation = await api.submit(
        {
            "name": "ev",
            "template": "evaluate",
            "params": {
                "config": "proj/args-fine-tuning.yaml",
                "eval_max_samples": 4,
                "max_new_tokens": 8,
                "output_dir": "proj/out",
            },
        }
    )
    done = await api.wait_for(evaluation["id"], {"SUCCEEDED", "FAILED"}, timeout=300)
    log = (await api.get(f"jobs/{evaluation['id']}/logs", rank=0, tail=200)).body["text"]
    assert done["state"] == "SUCCEEDED", log
    rouge = json.loads((partition / "proj" / "out" / "eval" / "rouge.json").read_text())
    assert rouge["samples"] == 4
    eval_metrics = (await api.get(f"jobs/{evaluation['id']}/metrics")).body
    assert eval_metrics["run"]["run_id"] == metrics["run"]["run_id"]
    assert "eval_rougeL_finetuned" in eval_metrics["metrics"]
    # Typed for the Evaluate view: every ROUGE variant, fine-tuned beside base, with the delta.
    rows = {row["name"]: row for row in eval_metrics["evaluation"]["rouge"]}
    assert list(rows) == ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    assert rows["rougeL"]["finetuned"] == pytest.approx(rouge["finetuned"]["rougeL"])
    assert rows["rougeL"]["delta"] == pytest.approx(
        rouge["finetuned"]["rougeL"] - rouge["base"]["rougeL"]
    )
    assert eval_metrics["evaluation"]["samples"] == 4
    run = eval_metrics["run"]
    assert run["url"] == (
        f"http://mlflow.test:5000/#/experiments/{run['experiment_id']}/runs/{run['run_id']}"
    )
    assert "| 8/8 [" in log  # the generation bar: 4 examples x (fine-tuned, base)
