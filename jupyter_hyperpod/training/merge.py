"""Merge the LoRA adapter into the base model (full precision), for serving without PEFT."""

from __future__ import annotations

import logging
from pathlib import Path

from .config import TrainingConfig

log = logging.getLogger("jupyter_hyperpod.training")


def merge_adapter(
    config: TrainingConfig, adapter: Path | None = None, target: Path | None = None
) -> Path:
    """Load the base unquantized (the adapter was trained against its 4-bit copy), merge, save."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    adapter = adapter or config.adapter_path
    target = target or config.merged_path
    if not (adapter / "adapter_config.json").is_file():
        raise FileNotFoundError(f"no adapter in {adapter} (train first)")
    cuda = torch.cuda.is_available()
    dtype = torch.bfloat16 if cuda and config.bf16 else torch.float32
    base = AutoModelForCausalLM.from_pretrained(
        config.model_id, dtype=dtype, device_map="auto" if cuda else None
    )
    merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
    target.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(target), safe_serialization=True)
    from .model import load_tokenizer

    load_tokenizer(
        str(adapter) if (adapter / "tokenizer_config.json").is_file() else config.model_id
    ).save_pretrained(str(target))
    log.info("merged model saved to %s", target)
    return target
