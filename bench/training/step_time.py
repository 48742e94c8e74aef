"""Step time of our training loop vs a plain Hugging Face Trainer loop, same model and data (CPU).

    PYTHONPATH=. python bench/training/step_time.py [--steps 30] [--hidden 256] [--layers 4]

Both train the same LoRA adapter (r 8, all linear layers, gradient checkpointing) on the same
randomly initialised Qwen2 and the same tokenized examples, without packing so that both see
the very same padded batches in the same order (the Trainer reads our batch plan
sequentially); each side runs twice, interleaved, and the best median counts
(the machine is shared). Both run in this process with the same torch thread count
(`--threads`, default $OMP_NUM_THREADS or 1, set before either side starts). Each step's wall
time is the time between its end and the previous step's end (so batch collation, logging and
the progress bar count), and its tokens/s is that step's own padded tokens over that same time;
the medians over the steady steps (the first two are warm-up) are printed side by side.
Target: ours / Trainer <= 1.02.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def build(tmp: Path, hidden: int, layers: int, rows: int) -> tuple[Path, Path]:
    from jupyter_hyperpod.training.synthetic import (
        build_random_model,
        small_tokenizer,
        write_synthetic_dataset,
    )

    model_dir = tmp / "model"
    build_random_model(
        model_dir,
        tokenizer=small_tokenizer(),
        hidden_size=hidden,
        num_layers=layers,
        num_heads=max(2, hidden // 64),
        num_kv_heads=2,
    )
    return model_dir, write_synthetic_dataset(tmp / "data.jsonl", rows)


def common_config(model_dir: Path, data: Path, tmp: Path, steps: int) -> dict:
    return {
        "model_id": str(model_dir),
        "dataset": str(data),
        "output_dir": str(tmp / "ours"),
        "train_dataset_path": str(tmp / "prepared/train"),
        "test_dataset_path": str(tmp / "prepared/test"),
        "quantization": "none",
        "packing": False,
        "max_steps": steps,
        "save_steps": 0,
        "per_device_train_batch_size": 4,
        "learning_rate": 2e-4,
        "max_seq_length": 512,
        "system_prompt": "You answer questions.",
        "log_system_metrics": False,
        "logging_steps": 1000,
    }


WARMUP_STEPS = 2


def paired(ends: list[float], tokens: list[int]) -> tuple[float, float]:
    """(median step seconds, median tokens/s) from each step's end time and its own token
    count: step i lasted ends[i] - ends[i-1] and processed tokens[i]."""
    steps = [(tokens[i], ends[i] - ends[i - 1]) for i in range(max(1, WARMUP_STEPS), len(ends))]
    if not steps:
        raise SystemExit("too few steps to time: raise --steps")
    return (
        statistics.median(wall for _, wall in steps),
        statistics.median(count / wall for count, wall in steps),
    )


def run_ours(values: dict, tag: str) -> tuple[float, float, int]:
    """In this process, like the Trainer side (same threads, same warm caches)."""
    import torch

    from jupyter_hyperpod.training.config import config_from_dict
    from jupyter_hyperpod.training.train import train

    out = Path(values["output_dir"] + "-" + tag)
    os.environ["HYPERPOD_JOB_ID"] = f"bench-{tag}"
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    train(config_from_dict({**values, "output_dir": str(out)}))
    log = json.loads((out / "train_results.json").read_text())["step_log"]
    step, rate = paired(log["ends"], log["padded_tokens"])
    return step, rate, int(log.get("threads") or torch.get_num_threads())


def run_trainer(values: dict, tag: str) -> tuple[float, float, int]:
    import torch
    from torch.utils.data import SequentialSampler
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from jupyter_hyperpod.training.batching import IGNORE_INDEX, make_plan, tokenize_records
    from jupyter_hyperpod.training.config import config_from_dict
    from jupyter_hyperpod.training.dataprep import read_split
    from jupyter_hyperpod.training.model import add_lora, load_base_model, load_tokenizer
    from jupyter_hyperpod.training.train import sequence_limit

    config = config_from_dict(values)
    torch.manual_seed(config.seed)
    tokenizer = load_tokenizer(config.model_id)
    limit = sequence_limit(config)  # our loop's: max_seq_length (512 here)
    examples, _ = tokenize_records(read_split(config.train_dataset_path), tokenizer, limit)
    model = add_lora(
        load_base_model(
            config.model_id, quantization="none", dtype=torch.float32, device=torch.device("cpu")
        ),
        config,
    )
    # Exactly our loop's batches, in our order: the Trainer reads them sequentially.
    plan = make_plan(
        examples,
        packing=False,
        max_length=limit,
        micro_batch_size=4,
        world_size=1,
        accumulation=1,
        seed=config.seed,
    )
    order = [row[0] for batch in plan.epoch_micro_batches(0) for row in batch]
    dataset = [{"input_ids": examples[i].input_ids, "labels": examples[i].labels} for i in order]
    pad = tokenizer.pad_token_id

    def collate(features: list[dict]) -> dict:
        width = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), width), pad)
        labels = torch.full((len(features), width), IGNORE_INDEX)
        mask = torch.zeros((len(features), width), dtype=torch.long)
        for i, f in enumerate(features):
            n = len(f["input_ids"])
            ids[i, :n] = torch.tensor(f["input_ids"])
            labels[i, :n] = torch.tensor(f["labels"])
            mask[i, :n] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.ends: list[float] = []
            self.threads = 0

        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            self.ends.append(time.perf_counter())
            self.threads = torch.get_num_threads()

    timer = Timer()
    args = TrainingArguments(
        output_dir=values["output_dir"] + f"-hf-{tag}",
        per_device_train_batch_size=4,
        max_steps=config.max_steps,
        learning_rate=config.learning_rate,
        logging_steps=1000,
        report_to=[],
        save_strategy="no",
        gradient_checkpointing=True,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        use_cpu=True,
        seed=config.seed,
        dataloader_num_workers=0,
        disable_tqdm=False,
        remove_unused_columns=False,
    )

    class InOrder(Trainer):
        def _get_train_sampler(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return SequentialSampler(dataset)  # the train_dataset below

    trainer = InOrder(
        model=model, args=args, train_dataset=dataset, data_collator=collate, callbacks=[timer]
    )
    padded: list[int] = []
    original = trainer.training_step

    def counting_step(model, inputs, num_items_in_batch=None):  # type: ignore[no-untyped-def]
        padded.append(int(inputs["input_ids"].numel()))
        return original(model, inputs, num_items_in_batch)

    trainer.training_step = counting_step  # type: ignore[method-assign]
    trainer.train()
    # One training_step per optimizer step (no accumulation): padded[i] is step i's batch.
    assert len(padded) == len(timer.ends), (len(padded), len(timer.ends))
    step, rate = paired(timer.ends, padded)
    return step, rate, timer.threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument(
        "--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
    )
    args = parser.parse_args()
    # Both sides, one thread count: our runtime leaves torch's threads alone when
    # OMP_NUM_THREADS is set (runtime.init_runtime), and the Trainer never sets them.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        model_dir, data = build(tmp, args.hidden, args.layers, args.rows)
        values = common_config(model_dir, data, tmp, args.steps)
        from jupyter_hyperpod.training.config import config_from_dict
        from jupyter_hyperpod.training.dataprep import prepare

        prepare(config_from_dict(values))
        ours, theirs = [], []
        for attempt in range(2):
            theirs.append(run_trainer(values, str(attempt)))
            ours.append(run_ours(values, str(attempt)))
    best_ours = min(ours)
    best_theirs = min(theirs)
    print()
    threads = {t[2] for t in theirs} | {o[2] for o in ours}
    if threads != {args.threads}:
        raise SystemExit(f"thread counts differ between the runs: {sorted(threads)}")
    print(
        f"model: Qwen2 hidden {args.hidden}, {args.layers} layers, LoRA r8 all-linear, "
        f"batch 4, no packing, {args.steps} steps, {args.threads} thread(s) on both sides"
    )
    print(f"{'loop':<28}{'median s/step':>16}{'padded tok/s':>16}")
    print(f"{'Hugging Face Trainer':<28}{best_theirs[0]:>16.4f}{best_theirs[1]:>16.0f}")
    print(f"{'jupyter_hyperpod.training':<28}{best_ours[0]:>16.4f}{best_ours[1]:>16.0f}")
    print(f"ratio ours/Trainer (step time): {best_ours[0] / best_theirs[0]:.3f} (target <= 1.02)")
    print(
        f"all attempts (s/step): Trainer {[round(t[0], 4) for t in theirs]}, "
        f"ours {[round(o[0], 4) for o in ours]}"
    )


if __name__ == "__main__":
    main()
