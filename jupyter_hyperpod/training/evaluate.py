"""Evaluation as the seed does it: ROUGE-1/2/L/Lsum of the fine-tuned model vs the base model.

The fine-tuned model is the merged one (merge_weights), else the base with the adapter, in the
base's full precision; the base is the full-precision base (not the 4-bit copy training used).
Greedy decoding from each test prompt, up to max_new_tokens (default: the longest test answer +
10%, so that long reasoning is not cut); the reference is the test answer (reasoning and
response as trained). Results go to a JSON file and to MLflow: the training job's run when its
run file is in output_dir, else a run of this job. With several ranks, each decodes a slice of
the test split and rank 0 scores them all.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Callable
from typing import Any

from .config import ConfigError, TrainingConfig
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
    done: Callable[[int], object] = lambda examples: None,
) -> tuple[list[str], int]:
    """Greedy continuations, and how many stopped at max_new_tokens without an end token;
    `done(n)` after each batch of n examples (the progress bar)."""
    import torch

    tokenizer.padding_side = "left"
    outputs: list[str] = []
    cut = 0
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
        if new_tokens.shape[1] >= max_new_tokens:
            cut += int((new_tokens != tokenizer.eos_token_id).all(dim=1).sum())
        outputs += [t.strip() for t in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]
        done(len(chunk))
    return outputs, cut


def generation_bar(examples: int, passes: int) -> Any:
    """A tqdm bar of the examples generated (every model's pass), redrawn after each batch:
    the log, the progress parser (tqdm's `| 4/32 [00:12<00:36, ...]`) and the panel say how far
    generation is, where there was a silence until the scores."""
    from tqdm.auto import tqdm

    return tqdm(
        total=examples * passes,
        desc="generating (fine-tuned)",
        unit="example",
        file=sys.stdout,
        mininterval=0,
        miniters=1,
        ncols=100,
        leave=True,
    )


def generation_length(config: TrainingConfig, tokenizer: Any, records: list[dict[str, Any]]) -> int:
    """max_new_tokens, else the longest answer of these test examples + 10% (none is cut)."""
    if config.max_new_tokens:
        return config.max_new_tokens
    answers = tokenizer([r["completion"] for r in records], add_special_tokens=False)["input_ids"]
    longest = max((len(ids) for ids in answers), default=1)
    return max(1, math.ceil(longest * 1.1) + 8)


def load_finetuned(config: TrainingConfig, runtime: Runtime) -> tuple[Any, Any, str]:
    """(tokenizer, model, kind): the merged model when there is one, else the base with the
    adapter, both in the base's full precision (never the 4-bit copy training used)."""
    from .model import compute_dtype, load_base_model, load_tokenizer

    dtype = compute_dtype(config, runtime.device)
    adapter = config.adapter_path
    if (config.merged_path / "config.json").is_file():
        model = load_base_model(
            str(config.merged_path), quantization="none", dtype=dtype, device=runtime.device
        )
        tokenizer = load_tokenizer(str(config.merged_path))
        kind = "merged"
    elif (adapter / "adapter_config.json").is_file():
        from peft import PeftModel

        base = load_base_model(
            config.model_id, quantization="none", dtype=dtype, device=runtime.device
        )
        model = PeftModel.from_pretrained(base, str(adapter))
        tokenizer = load_tokenizer(str(adapter))
        kind = "base+adapter"
    else:
        raise FileNotFoundError(
            f"no fine-tuned model: neither {config.merged_path} nor {adapter} (train first)"
        )
    if runtime.device.type == "cuda":
        model.to(runtime.device)
    return tokenizer, model.eval(), kind


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
    if not records:
        raise ConfigError(f"no test examples in {config.test_dataset_path}")
    tracker = Tracker.for_evaluation(config) if runtime.is_main else Tracker(False)
    try:
        return _score(config, runtime, records, tracker, started)
    except BaseException:
        tracker.end("FAILED")
        raise


def _score(
    config: TrainingConfig,
    runtime: Runtime,
    records: list[dict[str, Any]],
    tracker: Tracker,
    started: float,
) -> dict[str, Any]:
    from .model import compute_dtype, load_base_model

    tokenizer, model, kind = load_finetuned(config, runtime)
    max_new_tokens = generation_length(config, tokenizer, records)
    mine = records[runtime.rank :: runtime.world_size]
    prompts = [r["prompt"] for r in mine]
    log.info(
        "evaluating %d test examples (%d on this rank), greedy, up to %d new tokens: "
        "fine-tuned (%s) vs base, full precision",
        len(records),
        len(mine),
        max_new_tokens,
        kind,
    )
    bar = generation_bar(len(prompts), 2 if config.eval_base else 1)
    kwargs = {
        "batch_size": config.per_device_eval_batch_size,
        "max_new_tokens": max_new_tokens,
        "device": runtime.device,
        "done": bar.update,
    }
    predictions: dict[str, list[str]] = {}
    cut: dict[str, int] = {}
    predictions["finetuned"], cut["finetuned"] = generate(model, tokenizer, prompts, **kwargs)
    if config.eval_base:
        bar.set_description("generating (base)")
        if kind == "base+adapter":
            with model.disable_adapter():  # the same full-precision base, adapter off
                predictions["base"], cut["base"] = generate(model, tokenizer, prompts, **kwargs)
        else:
            del model
            base = load_base_model(
                config.model_id,
                quantization="none",
                dtype=compute_dtype(config, runtime.device),
                device=runtime.device,
            ).eval()
            if runtime.device.type == "cuda":
                base.to(runtime.device)
            predictions["base"], cut["base"] = generate(base, tokenizer, prompts, **kwargs)
    bar.close()
    references = [_reference(tokenizer, r) for r in mine]
    gathered = (
        runtime.gather_to_main((mine, references, predictions, cut))
        if runtime.distributed
        else [(mine, references, predictions, cut)]
    )
    if not runtime.is_main:
        return {}
    all_refs: list[str] = []
    all_preds: dict[str, list[str]] = {key: [] for key in predictions}
    all_cut = dict.fromkeys(predictions, 0)
    all_records: list[dict[str, Any]] = []
    for part_records, part_refs, part_preds, part_cut in gathered:
        all_records += part_records
        all_refs += part_refs
        for key in all_preds:
            all_preds[key] += part_preds[key]
            all_cut[key] += part_cut[key]
    results: dict[str, Any] = {
        key: rouge_scores(preds, all_refs) for key, preds in all_preds.items()
    }
    results["samples"] = len(all_refs)
    results["max_new_tokens"] = max_new_tokens
    results["max_new_tokens_source"] = (
        "config" if config.max_new_tokens else "longest test answer + 10%"
    )
    results["stopped_at_max_new_tokens"] = all_cut
    results["finetuned_model"] = kind
    results["base_model"] = config.model_id
    results["dtype"] = str(compute_dtype(config, runtime.device)).split(".")[-1]
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
    metrics = {
        f"eval_{key}_{which}": results[which][key] for which in all_preds for key in ROUGE_TYPES
    }
    metrics["eval_samples"] = float(len(all_refs))
    metrics["eval_max_new_tokens"] = float(max_new_tokens)
    tracker.log_metrics(metrics)
    tracker.log_artifact(out)
    tracker.end()
    return results


def _reference(tokenizer: Any, record: dict[str, Any]) -> str:
    """The answer as the model would print it (special tokens dropped, like the predictions)."""
    ids = tokenizer(record["completion"], add_special_tokens=False)["input_ids"]
    return tokenizer.decode(ids, skip_special_tokens=True).strip()
