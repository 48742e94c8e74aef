"""FSDP2 + 4-bit correctness: the same inputs through the same weights, sharded and unsharded.

bitsandbytes issue #1945 (open) reports wrong `Linear4bit` outputs under FSDP2 `fully_shard` with
bf16 quant storage, even on one rank. Training would then run on a silently different model.
`python -m jupyter_hyperpod.training fsdp-check` (under torchrun or our launcher) prints the
largest absolute difference between the unsharded and the sharded outputs for each storage
dtype asked for:

- `--synthetic`: a stack of NF4 `Linear4bit` layers quantized from seeded random weights
  (seconds; what the CPU tests run);
- `--config file.yaml`: the config's model loaded as training loads it, logits on a fixed batch
  (what the GPU benchmark runs beside its tokens/s).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .fsdp_sharding import shard_as_training, synthetic_difference
from .runtime import Runtime, init_runtime

log = logging.getLogger("jupyter_hyperpod.training")


def model_difference(runtime: Runtime, config: Any, storage_name: str) -> float:
    """Max |unsharded - sharded| of the config's model's logits on one fixed batch."""
    import torch

    from .model import (
        add_lora,
        compute_dtype,
        decoder_layers,
        load_base_model,
        resolve_quantization,
        storage_dtype,
    )

    dtype = compute_dtype(config, runtime.device)
    model = load_base_model(
        config.model_id,
        quantization=resolve_quantization(config, runtime.device),
        dtype=dtype,
        device=runtime.device,
        quant_storage=storage_name,
    )
    model = add_lora(model, config).eval()
    if runtime.device.type == "cuda":
        model.to(runtime.device)
    generator = torch.Generator().manual_seed(1945)
    vocab = int(model.config.vocab_size)
    ids = torch.randint(0, vocab, (2, 256), generator=generator).to(runtime.device)
    with torch.no_grad():
        expected = model(input_ids=ids, use_cache=False).logits.float()
    shard_as_training(model, decoder_layers(model), dtype, storage_dtype(storage_name, dtype))
    with torch.no_grad():
        got = model(input_ids=ids, use_cache=False).logits.float()
    return float((got - expected).abs().max())


def run(storages: list[str], config: Any = None, compute: str | None = None) -> dict[str, Any]:
    """Compare for each storage dtype; `compute`: the synthetic layers' compute dtype (default:
    bfloat16 on GPU, float32 on CPU, as training uses)."""
    import torch

    runtime = init_runtime()
    try:
        if not runtime.distributed:
            raise RuntimeError("fsdp-check needs a process group: run it under torchrun")
        results: dict[str, Any] = {
            "world_size": runtime.world_size,
            "device": runtime.device.type,
            "mode": "model" if config is not None else "synthetic",
            "max_abs_diff": {},
        }
        for name in storages:
            try:
                if config is not None:
                    diff = model_difference(runtime, config, name)
                else:
                    default = "bfloat16" if runtime.device.type == "cuda" else "float32"
                    dtype = getattr(torch, compute or default)
                    results["compute_dtype"] = str(dtype).split(".")[-1]
                    diff, held = synthetic_difference(runtime, getattr(torch, name), dtype)
                    results.setdefault("local_fraction", {})[name] = held
            except Exception as error:  # e.g. FSDP's param_dtype cast of packed fp32 storage
                results.setdefault("errors", {})[name] = f"{type(error).__name__}: {error}"[:300]
                log.warning("FSDP2 check, 4-bit storage %s failed: %s", name, error)
                continue
            results["max_abs_diff"][name] = diff
            log.info("FSDP2 vs unsharded, 4-bit storage %s: max abs diff %.3g", name, diff)
        if runtime.is_main:
            print(json.dumps(results), flush=True)
        return results
    finally:
        runtime.close()
