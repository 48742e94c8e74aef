"""Evaluation: ROUGE-1/2/L/Lsum of the fine-tuned model and of the base model on the test split.

Greedy decoding from each test prompt; the reference is the test answer (reasoning and response
as trained). Results go to a JSON file and to the training job's MLflow run. With several ranks,
each decodes a slice of the test split and rank 0 scores them all.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from .config import TrainingConfig
from .dataprep import read_split
from .mlflow_tracking import Tracker
from .runtime import Runtime, init_runtime

log = logging.getLogger("jupyter_hyperpod.training")

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def rouge_scores(predictions: list[str], references: list[str]) -> dict[str, float]:
    """Mean F1 of each ROUGE type (Lsum splits summaries on newlines, as rouge-score expects)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for prediction, reference in zip(predictions, references, strict=True):
        scores = scorer.score(reference, prediction)
        for key in ROUGE_TYPES:
            totals[key] += scores[key].fmeasure
    count = max(1, len(predictions))
    return {key: value / count for key, value in totals.items()}


def generate(
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    *,
    batch_size: int,
    max_new_tokens: int,
    device: Any,
) -> list[str]:
    import torch

    tokenizer.padding_side = "left"
    outputs: list[str] = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start : start + batch_size]
        encoded = tokenizer(chunk, add_special_tokens=False, return_tensors="pt", padding=True)
        encoded = {k: v.to(device) for k, v in encoded.items()}
        with torch.no_grad():
            generated = model.generate(
                **encoded,
                do_sample=False,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        new_tokens = generated[:, encoded["input_ids"].shape[1] :]
        outputs += [t.strip() for t in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]
    return outputs


def _load_models(config: TrainingConfig, runtime: Runtime) -> tuple[Any, Any, bool]:
    """(tokenizer, model, has_adapter): base + adapter when an adapter exists, else merged/base."""
    from .model import compute_dtype, load_base_model, load_tokenizer, resolve_quantization

    adapter = config.adapter_path
    has_adapter = (adapter / "adapter_config.json").is_file()
    dtype = compute_dtype(config, runtime.device)
    quantization = resolve_quantization(config, runtime.device)
    if has_adapter:
        from peft import PeftModel

        base = load_base_model(
            config.model_id, quantization=quantization, dtype=dtype, device=runtime.device
        )
        model = PeftModel.from_pretrained(base, str(adapter))
        tokenizer = load_tokenizer(str(adapter))
    elif (config.merged_path / "config.json").is_file():
        model = load_base_model(
            str(config.merged_path), quantization=quantization, dtype=dtype, device=runtime.device
        )
        tokenizer = load_tokenizer(str(config.merged_path))
    else:
        raise FileNotFoundError(f"no fine-tuned model: neither {adapter} nor {config.merged_path}")
    if runtime.device.type == "cuda" and quantization == "none":
        model.to(runtime.device)
    model.eval()
    return tokenizer, model, has_adapter


def evaluate(config: TrainingConfig) -> dict[str, Any]:
    runtime = init_runtime()
    try:
        return _evaluate(config, runtime)
    finally:
        runtime.close()


def _evaluate(config: TrainingConfig, runtime: Runtime) -> dict[str, Any]:
    started = time.perf_counter()
    records = read_split(config.test_dataset_path)
    if config.eval_max_samples:
        records = records[: config.eval_max_samples]
    tokenizer, model, has_adapter = _load_models(config, runtime)
    mine = records[runtime.rank :: runtime.world_size]
    prompts = [r["prompt"] for r in mine]
    log.info(
        "evaluating %d test examples (%d on this rank), greedy, max %d new tokens",
        len(records),
        len(mine),
        config.max_new_tokens,
    )
    kwargs = {
        "batch_size": config.per_device_eval_batch_size,
        "max_new_tokens": config.max_new_tokens,
        "device": runtime.device,
    }
    predictions = {"finetuned": generate(model, tokenizer, prompts, **kwargs)}
    if config.eval_base:
        if has_adapter:
            with model.disable_adapter():
                predictions["base"] = generate(model, tokenizer, prompts, **kwargs)
        else:
            from .model import compute_dtype, load_base_model

            del model
            base = load_base_model(
                config.model_id,
                quantization="none",
                dtype=compute_dtype(config, runtime.device),
                device=runtime.device,
            ).eval()
            predictions["base"] = generate(base, tokenizer, prompts, **kwargs)
    references = [_reference(tokenizer, r) for r in mine]
    gathered = (
        runtime.gather_to_main((mine, references, predictions))
        if runtime.distributed
        else [(mine, references, predictions)]
    )
    if not runtime.is_main:
        return {}
    all_refs: list[str] = []
    all_preds: dict[str, list[str]] = {key: [] for key in predictions}
    all_records: list[dict[str, Any]] = []
    for part_records, part_refs, part_preds in gathered:
        all_records += part_records
        all_refs += part_refs
        for key in all_preds:
            all_preds[key] += part_preds[key]
    results: dict[str, Any] = {
        key: rouge_scores(preds, all_refs) for key, preds in all_preds.items()
    }
    results["samples"] = len(all_refs)
    results["max_new_tokens"] = config.max_new_tokens
    results["seconds"] = round(time.perf_counter() - started, 2)
    results["examples"] = [
        {
            "question": r.get("question") or r["prompt"][-300:],
            "reference": ref,
            **{key: preds[i] for key, preds in all_preds.items()},
        }
        for i, (r, ref) in enumerate(zip(all_records, all_refs, strict=True))
        if i < 5
    ]
    out = config.eval_output_path
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, ensure_ascii=False))
    summary = ", ".join(f"{k}={results['finetuned'][k]:.4f}" for k in ROUGE_TYPES)
    if "base" in results:
        summary += " | base " + ", ".join(f"{k}={results['base'][k]:.4f}" for k in ROUGE_TYPES)
    log.info("ROUGE (fine-tuned) %s -> %s", summary, out)
    tracker = Tracker.for_evaluation(config)
    metrics = {
        f"eval_{key}_{which}": results[which][key] for which in all_preds for key in ROUGE_TYPES
    }
    tracker.log_metrics(metrics)
    tracker.log_artifact(out)
    tracker.end()
    return results


def _reference(tokenizer: Any, record: dict[str, Any]) -> str:
    """The answer as the model would print it (special tokens dropped, like the predictions)."""
    ids = tokenizer(record["completion"], add_special_tokens=False)["input_ids"]
    return tokenizer.decode(ids, skip_special_tokens=True).strip()
