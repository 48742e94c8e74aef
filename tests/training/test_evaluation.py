"""Evaluation as the seed does it: the merged model (or base + adapter) vs the full-precision base."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from jupyter_hyperpod.metrics import read_job_metrics
from jupyter_hyperpod.training.config import load_config
from jupyter_hyperpod.training.dataprep import prepare, read_split
from jupyter_hyperpod.training.evaluate import evaluate
from jupyter_hyperpod.training.merge import merge_adapter


def greedy(model_dir: Path, prompt: str, max_new_tokens: int, adapter: Path | None = None) -> str:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        out = model.eval().generate(
            **ids,
            do_sample=False,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    new = out[0, ids["input_ids"].shape[1] :]
    return tokenizer.decode(new, skip_special_tokens=True).strip()


@pytest.mark.slow
def test_merged_and_adapter_against_the_full_precision_base(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cwd = project.parent
    values = yaml.safe_load(project.read_text())
    values.pop("max_new_tokens")  # the default: as long as the longest answer
    values.update(eval_max_samples=3, per_device_eval_batch_size=3)
    project.write_text(yaml.safe_dump(values))
    config = load_config(project)
    prepare(config)
    # A "fine-tuned" adapter without the cost of training: LoRA with random (non-zero) B.
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(config.model_id, dtype=torch.float32)
    lora = LoraConfig(r=4, lora_alpha=64, target_modules="all-linear", init_lora_weights=False)
    adapted = get_peft_model(base, lora)
    adapted.save_pretrained(str(config.adapter_path))
    AutoTokenizer.from_pretrained(config.model_id).save_pretrained(str(config.adapter_path))

    # The steps in this process (the command line around them is tested in test_pipeline).
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    # The step sets up logging (basicConfig(force=True)): give pytest its handlers back after.
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    monkeypatch.setattr(logging.root, "level", logging.root.level)
    monkeypatch.setenv("HYPERPOD_JOB_ID", "eval-a")
    evaluate(config)
    adapter_run = json.loads(config.eval_output_path.read_text())
    assert adapter_run["finetuned_model"] == "base+adapter" and adapter_run["dtype"] == "float32"

    merge_adapter(config)
    monkeypatch.setenv("HYPERPOD_JOB_ID", "eval-m")
    evaluate(config)
    merged_run = json.loads(config.eval_output_path.read_text())
    assert merged_run["finetuned_model"] == "merged"

    # The default length covers the longest answer: nothing the references hold is cut.
    tokenizer = AutoTokenizer.from_pretrained(config.model_id)
    records = read_split(config.test_dataset_path)[:3]
    longest = max(
        len(tokenizer(r["completion"], add_special_tokens=False)["input_ids"]) for r in records
    )
    assert merged_run["max_new_tokens"] >= longest > 24  # (the old fixed 256 was a guess)
    assert merged_run["max_new_tokens_source"] == "longest test answer + 10%"

    # The predictions are those of the full-precision models themselves.
    prompt, n = records[0]["prompt"], merged_run["max_new_tokens"]
    example = merged_run["examples"][0]
    assert example["base"] == greedy(Path(config.model_id), prompt, n)
    assert example["finetuned"] == greedy(config.merged_path, prompt, n)
    assert adapter_run["examples"][0]["finetuned"] == greedy(
        Path(config.model_id), prompt, n, adapter=config.adapter_path
    )
    assert example["finetuned"] != example["base"]
    assert set(merged_run["finetuned"]) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}

    # No training run here: each evaluation job has its own MLflow run with the scores.
    uri = f"sqlite:///{cwd / 'model' / 'mlflow.db'}"
    metrics = read_job_metrics(uri, "eval-m")
    assert metrics.run is not None, metrics.message
    assert metrics.metrics["eval_rougeL_finetuned"][0].value == pytest.approx(
        merged_run["finetuned"]["rougeL"]
    )
    assert metrics.metrics["eval_max_new_tokens"][0].value == n
