"""The sharded-vs-unsharded comparison itself (`fsdp_check.py` runs it as a command; the
training's load guard, `model.check_fsdp_4bit`, runs it before every 4-bit FSDP load). Kept apart
from both so that neither imports the other: it needs only torch, bitsandbytes and the runtime."""

from __future__ import annotations

import copy
from typing import Any

from .runtime import Runtime


def shard_as_training(model: Any, layers: list[Any], dtype: Any, storage: Any) -> None:
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
    shard_as_training(sharded, list(sharded), dtype, storage)
    weight = sharded[0].weight
    held = weight.to_local().numel() / weight.numel() if hasattr(weight, "to_local") else 1.0
    with torch.no_grad():
        got = sharded(inputs).float()
    assert float(expected.abs().max()) > 0  # a real output, not zeros
    return float((got - expected).abs().max()), held
