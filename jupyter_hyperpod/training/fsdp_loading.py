"""`fsdp_config.cpu_ram_efficient_loading`: the checkpoint is read once, by rank 0.

transformers' own version of this skips quantized models (every rank reads the whole checkpoint
when loading in 4 bits: `modeling_utils`, "not is_quantized"), which for the seed's 14B model is
28 GB per rank from the shared file system. Here, under FSDP:

1. rank 0 loads the model as usual (quantizing it) and tells the others the 4-bit layers' shapes
   and quantization states (small: block scales), and every tensor's name, shape and dtype;
2. the other ranks build the same model on the meta device (no memory, no reads);
3. every rank adds LoRA and shards with `fully_shard`; the meta ranks allocate only their shards;
4. rank 0 broadcasts each full tensor and every rank keeps its own shard of it (what accelerate
   does for FSDP2 with `fsdp2_load_full_state_dict`), buffers in full.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from .runtime import Runtime

log = logging.getLogger("jupyter_hyperpod.training")


def describe_4bit(model: Any) -> dict[str, dict[str, Any]]:
    """Rank 0: what the meta ranks need to rebuild each Linear4bit (quant state on CPU)."""
    import bitsandbytes as bnb

    layers: dict[str, dict[str, Any]] = {}
    for name, module in model.named_modules():
        if isinstance(module, bnb.nn.Linear4bit):
            state = copy.deepcopy(module.weight.quant_state)
            state.to("cpu")  # QuantState.to moves in place; pickled CUDA tensors would land on
            # the sender's device index on every receiver
            layers[name] = {
                "in_features": module.in_features,
                "out_features": module.out_features,
                "bias": module.bias is not None,
                "compute_dtype": module.compute_dtype,
                "quant_storage": module.quant_storage,
                "quant_type": state.quant_type,
                "blocksize": state.blocksize,
                "quant_state": state,
            }
    return layers


def tensor_specs(model: Any) -> list[tuple[str, tuple[int, ...], Any, bool]]:
    """(name, shape, dtype, is_parameter) of every parameter and buffer, in a fixed order."""
    specs = [(n, tuple(p.shape), p.dtype, True) for n, p in model.named_parameters()]
    specs += [(n, tuple(b.shape), b.dtype, False) for n, b in model.named_buffers()]
    return specs


def meta_skeleton(model_id: str, layers: dict[str, dict[str, Any]], dtype: Any, device: Any) -> Any:
    """The model's modules on the meta device, 4-bit layers as rank 0 has them."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_id)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    if layers:
        import bitsandbytes as bnb

        for name, info in layers.items():
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            layer = bnb.nn.Linear4bit(
                info["in_features"],
                info["out_features"],
                bias=info["bias"],
                compute_dtype=info["compute_dtype"],
                quant_type=info["quant_type"],
                quant_storage=info["quant_storage"],
                device="meta",
            )
            state = info["quant_state"]
            state.to(device)
            packed = (info["in_features"] * info["out_features"] + 1) // 2
            packed //= torch.tensor([], dtype=info["quant_storage"]).element_size()
            layer.weight = bnb.nn.Params4bit(
                torch.empty((packed, 1), dtype=info["quant_storage"], device="meta"),
                requires_grad=False,
                quant_state=state,
                blocksize=info["blocksize"],
                quant_type=info["quant_type"],
                quant_storage=info["quant_storage"],
                module=layer,
                bnb_quantized=True,
            )
            layer.quant_state = state
            # The AVX512-BF16 CPU path repacks weights in eval mode and breaks later training.
            layer.support_avx512bf16_for_cpu = False
            setattr(parent, child, layer)
    return model


def conform(model: Any, specs: list[tuple[str, tuple[int, ...], Any, bool]]) -> None:
    """Meta ranks: every tensor gets rank 0's shape and dtype (e.g. fp32-kept modules)."""
    import torch

    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    expected = {name for name, *_ in specs}
    mine = set(params) | set(buffers)
    if expected != mine:
        raise RuntimeError(
            "cpu_ram_efficient_loading: the model built on the meta device differs from rank "
            f"0's: missing {sorted(expected - mine)[:5]}, extra {sorted(mine - expected)[:5]}"
        )
    for name, shape, dtype, is_param in specs:
        tensor = params[name] if is_param else buffers[name]
        if tuple(tensor.shape) == shape and tensor.dtype == dtype:
            continue
        owner_name, _, leaf = name.rpartition(".")
        owner = model.get_submodule(owner_name) if owner_name else model
        empty = torch.empty(shape, dtype=dtype, device="meta")
        if is_param:
            owner._parameters[leaf] = torch.nn.Parameter(empty, requires_grad=tensor.requires_grad)
        else:
            owner._buffers[leaf] = empty


def full_tensors(model: Any) -> dict[str, Any]:
    """Rank 0, before sharding: references to every full parameter and buffer."""
    tensors = {n: p.detach() for n, p in model.named_parameters()}
    tensors.update({n: b for n, b in model.named_buffers()})
    return tensors


def materialize(model: Any, device: Any) -> None:
    """Meta ranks, after `fully_shard`: allocate (only this rank's shards of) every tensor."""
    model.to_empty(device=device)


def load_from_rank0(
    model: Any,
    full: dict[str, Any] | None,
    specs: list[tuple[str, tuple[int, ...], Any, bool]],
    runtime: Runtime,
) -> None:
    """Broadcast each full tensor from rank 0; each rank copies its own shard (or all of a buffer)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    comm = runtime.device if runtime.device.type == "cuda" else torch.device("cpu")
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    for name, shape, dtype, is_param in specs:
        if runtime.is_main:
            assert full is not None
            buffer = full[name].to(comm)
        else:
            buffer = torch.empty(shape, dtype=dtype, device=comm)
        dist.broadcast(buffer, src=0)
        if runtime.is_main:
            continue  # rank 0 already holds these values (sharded by fully_shard)
        target = params[name] if is_param else buffers[name]
        with torch.no_grad():
            if isinstance(target, DTensor):
                local = target.to_local()
                chunks = torch.chunk(buffer, runtime.world_size, dim=0)
                if runtime.rank < len(chunks) and local.numel():
                    local.copy_(chunks[runtime.rank].reshape(local.shape))
            else:
                target.copy_(buffer.reshape(target.shape))
        del buffer
