"""Padding waste with and without sequence packing (no model: tokenization and batching only).

    PYTHONPATH=. python bench/training/padding.py

Two length distributions: the synthetic reasoning dataset through the real DeepSeek tokenizer
(max_seq_length 512), and a long-tailed one shaped like chain-of-thought SFT data such as the
seed's medical-o1-reasoning-SFT (log-normal, median ~600 tokens, max_seq_length 2048). Waste is
pad tokens / all tokens in the micro-batches of one epoch (batch 2 per device, the seed's).
Target with packing: < 5%.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from jupyter_hyperpod.training.batching import Example, collate, make_plan


def waste(examples: list[Example], *, packing: bool, max_length: int, batch: int) -> float:
    plan = make_plan(
        examples,
        packing=packing,
        max_length=max_length,
        micro_batch_size=batch,
        world_size=1,
        accumulation=1,
        seed=42,
    )
    micro = plan.epoch_micro_batches(0)[: plan.micro_batches_per_epoch]  # no wrap-around
    real = padded = 0
    for rows in micro:
        out = collate(rows, examples, 0, packing=packing)
        real += out["real_tokens"]
        padded += out["padded_tokens"]
    return 1.0 - real / padded


def synthetic_examples() -> list[Example]:
    from jupyter_hyperpod.training.batching import tokenize_records
    from jupyter_hyperpod.training.config import load_config
    from jupyter_hyperpod.training.dataprep import to_record
    from jupyter_hyperpod.training.synthetic import deepseek_tokenizer, synthetic_rows

    config = load_config(None)
    records = [to_record(row, config) for row in synthetic_rows(2000)]
    examples, _ = tokenize_records(records, deepseek_tokenizer(), 512)
    return examples


def long_tailed_examples(count: int = 5000) -> list[Example]:
    rng = random.Random(0)
    lengths = [min(2048, max(64, int(rng.lognormvariate(6.4, 0.55)))) for _ in range(count)]
    return [Example([1] * n, [1] * n) for n in lengths]


def main() -> None:
    cases = [
        ("synthetic reasoning, DeepSeek tokenizer", synthetic_examples(), 512),
        ("long-tailed CoT lengths (log-normal)", long_tailed_examples(), 2048),
    ]
    print(f"{'data':<42}{'examples':>9}{'max len':>9}{'no packing':>12}{'packing':>10}")
    for name, examples, max_length in cases:
        plain = waste(examples, packing=False, max_length=max_length, batch=2)
        packed = waste(examples, packing=True, max_length=max_length, batch=2)
        print(f"{name:<42}{len(examples):>9}{max_length:>9}{plain:>12.2%}{packed:>10.2%}")
    print("target with packing: < 5%")


if __name__ == "__main__":
    main()
