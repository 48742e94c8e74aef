"""The whole module on CPU: QLoRA training, evaluation, merge, MLflow, kill + resume, FSDP."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from jupyter_hyperpod.metrics import read_job_metrics
from jupyter_hyperpod.training.checkpoint import list_checkpoints

from .conftest import run_module


def ok(result) -> None:  # type: ignore[no-untyped-def]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def results(project: Path, output: str = "model") -> dict:
    return json.loads((project.parent / output / "train_results.json").read_text())


def test_qlora_trains_evaluates_merges_and_reports_to_mlflow(project: Path) -> None:
    import torch

    cwd = project.parent
    trained = run_module(
        [
            "train",
            "--config",
            project.name,
            "--set",
            "max_steps=40",
            "--set",
            "save_steps=20",
            "--set",
            "merge_weights=true",
            "--set",
            "log_system_metrics=true",
        ],
        cwd,
        HYPERPOD_JOB_ID="ft-job-1",
        HYPERPOD_JOB_NAME="ft",
        MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL="1",
    )
    ok(trained)
    summary = results(project)
    assert summary["quantization"] == "nf4" and summary["parallelism"] == "single"
    assert summary["steps"] == 40
    # Progress: a line per step with loss, tokens/s and ETA.
    assert "step 40/40 | loss " in trained.stdout and "tok/s | eta 0:00:00" in trained.stdout

    uri = f"sqlite:///{cwd / 'model' / 'mlflow.db'}"
    metrics = read_job_metrics(uri, "ft-job-1")
    assert metrics.run is not None and metrics.run.status == "FINISHED", metrics.message
    losses = metrics.metrics["loss"]
    assert [p.step for p in losses] == list(range(1, 41))
    assert losses[-1].value < 0.4 * losses[0].value  # the loss falls
    assert summary["final_loss"] == pytest.approx(losses[-1].value)
    assert {"tokens_per_second", "learning_rate", "grad_norm"} <= set(metrics.metrics)
    assert any(key.startswith("system/cpu") for key in metrics.metrics)  # system metrics too
    assert read_job_metrics(uri, "another-job").run is None

    evaluated = run_module(
        ["evaluate", "--config", project.name], cwd, HYPERPOD_JOB_ID="eval-job-1"
    )
    ok(evaluated)
    rouge = json.loads((cwd / "model" / "eval" / "rouge.json").read_text())
    assert set(rouge["finetuned"]) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}
    assert rouge["samples"] == 12
    assert rouge["finetuned"]["rougeL"] > rouge["base"]["rougeL"] + 0.3
    # Evaluation logs into the training run, which the evaluation job's id also finds.
    after = read_job_metrics(uri, "ft-job-1")
    assert after.metrics["eval_rougeL_finetuned"][0].value == pytest.approx(
        rouge["finetuned"]["rougeL"]
    )
    assert read_job_metrics(uri, "eval-job-1").run.run_id == after.run.run_id  # type: ignore[union-attr]

    # The merged model computes what base + adapter compute.
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(cwd / "model" / "merged").eval()
    base = AutoModelForCausalLM.from_pretrained(
        json.loads((cwd / "model" / "adapter" / "adapter_config.json").read_text())[
            "base_model_name_or_path"
        ]
    )
    adapted = PeftModel.from_pretrained(base, cwd / "model" / "adapter").eval()
    ids = torch.tensor([[1, 5, 9, 42, 7]])
    with torch.no_grad():
        torch.testing.assert_close(
            merged(input_ids=ids).logits, adapted(input_ids=ids).logits, atol=1e-4, rtol=1e-4
        )


def test_a_killed_job_resumes_from_its_checkpoint_to_the_same_loss(project: Path) -> None:
    cwd = project.parent
    # Plain LoRA here (QLoRA is covered above): the resume logic is the same, the imports lighter.
    common = [
        "train",
        "--config",
        project.name,
        "--set",
        "max_steps=12",
        "--set",
        "save_steps=6",
        "--set",
        "quantization=none",
    ]
    unbroken = run_module([*common, "--set", "output_dir=unbroken"], cwd, HYPERPOD_JOB_ID="u-1")
    ok(unbroken)

    killed = run_module(
        [*common, "--set", "output_dir=broken"],
        cwd,
        HYPERPOD_JOB_ID="b-1",
        HYPERPOD_TRAIN_KILL_AFTER_STEP="6",
    )
    assert killed.returncode == -signal.SIGKILL
    assert [step for step, _ in list_checkpoints(cwd / "broken" / "checkpoints")] == [6]
    assert not (cwd / "broken" / "adapter").exists()

    resumed = run_module([*common, "--set", "output_dir=broken"], cwd, HYPERPOD_JOB_ID="b-1")
    ok(resumed)
    assert "resumed from" in resumed.stdout and "at step 6/12" in resumed.stdout
    assert results(project, "broken")["resumed_from_step"] == 6
    assert results(project, "broken")["final_loss"] == results(project, "unbroken")["final_loss"]

    # Both attempts wrote into one MLflow run: steps 1-6, then 7-12.
    metrics = read_job_metrics(f"sqlite:///{cwd / 'broken' / 'mlflow.db'}", "b-1")
    assert [p.step for p in metrics.metrics["loss"]] == list(range(1, 13))
    unbroken_losses = read_job_metrics(f"sqlite:///{cwd / 'unbroken' / 'mlflow.db'}", "u-1")
    assert [p.value for p in metrics.metrics["loss"]] == [
        p.value for p in unbroken_losses.metrics["loss"]
    ]


def test_two_ranks_really_shard_with_fsdp_under_torchrun(project: Path) -> None:
    cwd = project.parent
    run = run_module(
        [
            "train",
            "--config",
            project.name,
            "--set",
            "max_steps=16",
            "--set",
            "save_steps=8",
            "--set",
            "per_device_train_batch_size=2",
        ],
        cwd,
        torchrun=2,
        HYPERPOD_JOB_ID="fsdp-1",
    )
    ok(run)
    summary = results(project)
    assert summary["parallelism"] == "fsdp" and summary["world_size"] == 2
    assert summary["quantization"] == "nf4"
    # Each rank holds half of the LoRA weights (FSDP2 shards dim 0), not a replica.
    assert summary["trainable_params_local"] * 2 == summary["trainable_params"]
    assert summary["fsdp_units"] == 3  # two decoder layers + the root
    metrics = read_job_metrics(f"sqlite:///{cwd / 'model' / 'mlflow.db'}", "fsdp-1")
    losses = [p.value for p in metrics.metrics["loss"]]
    assert len(losses) == 16 and losses[-1] < 0.5 * losses[0]
    assert "[rank 1]" in run.stdout  # both ranks ran
    assert (cwd / "model" / "adapter" / "adapter_model.safetensors").is_file()
