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

import copy
import json
import logging
from typing import Any

from .runtime import Runtime, init_runtime

log = logging.getLogger("jupyter_hyperpod.training")


def _shard(model: Any, layers: list[Any], dtype: Any, storage: Any) -> None:
    """fully_shard as training does (`model.apply_fsdp`): parameters cast to the compute dtype
    only when the 4-bit weights are stored in it."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    kwargs: dict[str, Any] = {"reshard_after_forward": True}
    if dtype != torch.float32 and storage == dtype:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    for layer in layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)


def synthetic_difference(
    runtime: Runtime, storage: Any, dtype: Any, *, width: int = 256, depth: int = 3
) -> tuple[float, float]:
    """(max |unsharded - sharded| over a Linear4bit stack's outputs (same weights, same
    inputs), the fraction of the packed weights this rank holds once sharded)."""
    import bitsandbytes as bnb
    import torch

    torch.manual_seed(1945)
    layers = []
    for _ in range(depth):
        layer = bnb.nn.Linear4bit(
            width, width, bias=True, compute_dtype=dtype, quant_type="nf4", quant_storage=storage
        )
        layer.weight = bnb.nn.Params4bit(
            torch.randn(width, width) * 0.05,
            requires_grad=False,
            quant_type="nf4",
            quant_storage=storage,
            module=layer,
        )
        layer.support_avx512bf16_for_cpu = False
        layers.append(layer)
    model = torch.nn.Sequential(*layers).to(runtime.device)  # .to() quantizes
    inputs = torch.randn(4, 16, width, device=runtime.device, dtype=dtype)
    with torch.no_grad():
        expected = model(inputs).float()
    sharded = copy.deepcopy(model)
    _shard(sharded, list(sharded), dtype, storage)
    weight = sharded[0].weight
    held = weight.to_local().numel() / weight.numel() if hasattr(weight, "to_local") else 1.0
    with torch.no_grad():
        got = sharded(inputs).float()
    assert float(expected.abs().max()) > 0  # a real output, not zeros
    return float((got - expected).abs().max()), held


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
    _shard(model, decoder_layers(model), dtype, storage_dtype(storage_name, dtype))
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
