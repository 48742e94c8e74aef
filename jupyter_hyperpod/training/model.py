"""Loading the base model (4-bit NF4 or full precision), LoRA adapters, and FSDP2 sharding."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

from .config import ConfigError, TrainingConfig
from .runtime import Runtime

log = logging.getLogger("jupyter_hyperpod.training")


def load_tokenizer(model_id: str) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def compute_dtype(config: TrainingConfig, device: Any) -> Any:
    import torch

    if device.type == "cuda" and config.bf16 and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def bitsandbytes_works(device: Any) -> str | None:
    """None when 4-bit NF4 runs on `device`, else why not (checked by quantizing a tensor)."""
    try:
        import bitsandbytes.functional as bnbf
        import torch

        sample = torch.randn(64, 64, device=device)
        packed, state = bnbf.quantize_4bit(sample, quant_type="nf4")
        restored = bnbf.dequantize_4bit(packed, state)
        if not torch.isfinite(restored).all():
            return "4-bit round trip gave non-finite values"
    except Exception as error:  # ImportError, missing native library, unsupported device
        return f"{type(error).__name__}: {error}"
    return None


def resolve_quantization(config: TrainingConfig, device: Any) -> str:
    if config.quantization == "none":
        return "none"
    problem = bitsandbytes_works(device)
    if problem is None:
        return "nf4"
    if config.quantization == "nf4":
        raise ConfigError(f"quantization: nf4 needs bitsandbytes on {device.type}: {problem}")
    log.warning("bitsandbytes 4-bit cannot run here (%s): training plain LoRA", problem)
    return "none"


def storage_dtype(name: str, compute: Any) -> Any:
    """The packed 4-bit weights' dtype: `auto` is the compute dtype (FSDP shards it like the
    other parameters; the seed sets `bnb_4bit_quant_storage` to its compute dtype too)."""
    import torch

    return compute if name == "auto" else getattr(torch, name)


def load_base_model(
    model_id: str,
    *,
    quantization: str,
    dtype: Any,
    device: Any,
    for_fsdp: bool = False,
    quant_storage: str = "auto",
) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    from . import readmeter

    readmeter.install()
    kwargs: dict[str, Any] = {"dtype": dtype}
    if quantization == "nf4":
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype,
            bnb_4bit_quant_storage=storage_dtype(quant_storage, dtype),
        )
        kwargs["device_map"] = {"": device}
    elif device.type == "cuda" and not for_fsdp:
        kwargs["device_map"] = {"": device}
    if not Path(model_id).exists():
        log.info(
            "model_id %s is not a local directory: loading from the Hugging Face cache/hub",
            model_id,
        )
    model = AutoModelForCausalLM.from_pretrained(model_id, **kwargs)
    if quantization == "nf4":
        import bitsandbytes as bnb

        for module in model.modules():
            if isinstance(module, bnb.nn.Linear4bit):
                # The AVX512-BF16 CPU path repacks weights in eval mode and breaks later training.
                module.support_avx512bf16_for_cpu = False
    elif device.type == "cpu":
        model.to(torch.float32)
    return model


def add_lora(model: Any, config: TrainingConfig) -> Any:
    from peft import LoraConfig, get_peft_model

    for parameter in model.parameters():
        parameter.requires_grad_(False)
    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=config.lora_target_modules,
        bias="none",
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, lora)
    if config.gradient_checkpointing or config.fsdp_config.get("activation_checkpointing"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    return model


def decoder_layers(model: Any, classes: list[str] | None = None) -> list[Any]:
    """The transformer blocks (FSDP's auto_wrap units): `classes` (fsdp_config's
    transformer_layer_cls_to_wrap) or the model's own no-split classes."""
    if classes:
        names = set(classes)
    else:
        names = set(getattr(model, "_no_split_modules", None) or [])
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        names |= set(getattr(inner, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        key = "fsdp_config.transformer_layer_cls_to_wrap" if classes else "fsdp"
        raise ConfigError(f"{key}: no module of class {sorted(names)} in the model to wrap")
    return layers


def casts_params_safely(config: TrainingConfig, dtype: Any) -> bool:
    """FSDP's mixed precision casts every parameter to the compute dtype, the packed 4-bit
    weights included: only harmless when they are stored in that dtype already. With another
    storage (e.g. float32 to avoid bitsandbytes #1945) the parameters keep their dtype and
    bitsandbytes still computes in `dtype`."""
    return storage_dtype(config.quant_storage, dtype) == dtype


def apply_fsdp(model: Any, config: TrainingConfig, runtime: Runtime, dtype: Any) -> dict[str, Any]:
    """Shard with FSDP2 (`fully_shard`) following the seed's `fsdp`/`fsdp_config` options.

    full_shard: reshard after forward; shard_grad_op: keep parameters gathered until backward
    (fsdp_config.reshard_after_forward overrides both); auto_wrap: one unit per transformer block
    (transformer_layer_cls_to_wrap names them); offload (or fsdp_config.offload_params): sharded
    parameters, gradients and optimizer state live in CPU memory (GPU only, meaningless on CPU);
    forward_prefetch: the next block's all-gather starts during this block's forward;
    backward_prefetch: backward_pre (FSDP2's own order: the previous block's all-gather is
    issued before this block's backward), no_prefetch: none.
    """
    import torch
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    options = config.fsdp_options
    fsdp_config = config.fsdp_config or {}
    reshard = bool(fsdp_config.get("reshard_after_forward", "shard_grad_op" not in options))
    kwargs: dict[str, Any] = {"reshard_after_forward": reshard}
    offload = "offload" in options or bool(fsdp_config.get("offload_params"))
    if offload and runtime.device.type == "cuda":
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=True)
    elif offload:
        log.info("fsdp offload: parameters already live in CPU memory (no GPU)")
    if dtype != torch.float32 and casts_params_safely(config, dtype):
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    wrapped = 0
    layers: list[Any] = []
    if "auto_wrap" in options or not options - {"offload"}:
        layers = decoder_layers(model, fsdp_config.get("transformer_layer_cls_to_wrap"))
        for layer in layers:
            fully_shard(layer, **kwargs)
            wrapped += 1
    fully_shard(model, **kwargs)
    if fsdp_config.get("forward_prefetch") and len(layers) > 1:
        for current, following in itertools.pairwise(layers):
            current.set_modules_to_forward_prefetch([following])
    prefetch = fsdp_config.get("backward_prefetch", "backward_pre")
    for index, layer in enumerate(layers):
        # backward runs the blocks in reverse: block i prefetches block i-1.
        layer.set_modules_to_backward_prefetch(
            [layers[index - 1]] if prefetch == "backward_pre" and index > 0 else []
        )
    return {
        "fsdp_param_dtype": str(kwargs["mp_policy"].param_dtype if "mp_policy" in kwargs else "")
        or "as stored",
        "fsdp_units": wrapped + 1,
        "reshard_after_forward": reshard,
        "cpu_offload": "offload_policy" in kwargs,
        "backward_prefetch": prefetch,
        "forward_prefetch": bool(fsdp_config.get("forward_prefetch")),
    }


FSDP_4BIT_TOLERANCE = 1e-2


def check_fsdp_4bit(runtime: Runtime, storage: Any, dtype: Any) -> float:
    """Before the model load: do NF4 layers give the same outputs sharded as unsharded here?
    (bitsandbytes #1945: not under FSDP2 with bf16 storage on some set-ups.) A few 256-wide
    layers, milliseconds; a mismatch stops the job with the storage to use instead."""
    import torch

    from .fsdp_sharding import synthetic_difference

    devices = [runtime.device] if runtime.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):  # leave the training RNG streams untouched
        diff, _ = synthetic_difference(runtime, storage, dtype)
    if diff > FSDP_4BIT_TOLERANCE:
        other = "float32" if storage != torch.float32 else "bfloat16"
        raise ConfigError(
            f"quant_storage: FSDP2 changes the outputs of 4-bit layers stored as "
            f"{str(storage).split('.')[-1]} on this {runtime.device.type} (max abs diff "
            f"{diff:.3g}; bitsandbytes issue #1945): set quant_storage: {other}"
        )
    log.info("FSDP2 + 4-bit check: sharded and unsharded outputs agree (max abs diff %.2g)", diff)
    return diff


def prepare_model(config: TrainingConfig, runtime: Runtime) -> tuple[Any, dict[str, Any]]:
    """Base model + LoRA, sharded when distributed. Returns (model, facts for logs and MLflow)."""
    dtype = compute_dtype(config, runtime.device)
    quantization = resolve_quantization(config, runtime.device)
    use_fsdp = runtime.distributed and "no_shard" not in config.fsdp_options
    if config.tf32 and runtime.device.type == "cuda":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    guard: float | None = None
    if use_fsdp and quantization == "nf4":
        guard = check_fsdp_4bit(runtime, storage_dtype(config.quant_storage, dtype), dtype)
    efficient = use_fsdp and bool(config.fsdp_config.get("cpu_ram_efficient_loading"))
    layers: dict[str, Any] = {}
    if runtime.is_main or not efficient:
        model = load_base_model(
            config.model_id,
            quantization=quantization,
            dtype=dtype,
            device=runtime.device,
            for_fsdp=use_fsdp,
            quant_storage=config.quant_storage,
        )
    if efficient:
        from . import fsdp_loading

        if runtime.is_main and quantization == "nf4":
            layers = fsdp_loading.describe_4bit(model)
        layers = runtime.broadcast_object(layers)
        if not runtime.is_main:
            model = fsdp_loading.meta_skeleton(config.model_id, layers, dtype, runtime.device)
    model = add_lora(model, config)
    if efficient:
        specs = runtime.broadcast_object(
            fsdp_loading.tensor_specs(model) if runtime.is_main else None
        )
        full = fsdp_loading.full_tensors(model) if runtime.is_main else None
        if not runtime.is_main:
            fsdp_loading.conform(model, specs)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    facts: dict[str, Any] = {
        "quantization": quantization,
        "compute_dtype": str(dtype).split(".")[-1],
        "trainable_params": trainable,
        "total_params": total,
        "parallelism": "single",
    }
    if use_fsdp:
        facts.update(apply_fsdp(model, config, runtime, dtype))
        facts["parallelism"] = "fsdp"
        if efficient:
            if not runtime.is_main:
                offloaded = facts["cpu_offload"]
                fsdp_loading.materialize(model, "cpu" if offloaded else runtime.device)
            fsdp_loading.load_from_rank0(model, full, specs, runtime)
            del full
        facts["cpu_ram_efficient_loading"] = efficient
        if guard is not None:
            facts["fsdp_4bit_check_max_abs_diff"] = guard
        # Evidence that parameters are really sharded: this rank holds only its part.
        facts["trainable_params_local"] = sum(
            p.to_local().numel() if hasattr(p, "to_local") else p.numel()
            for p in model.parameters()
            if p.requires_grad
        )
    elif runtime.distributed:
        from torch.nn.parallel import DistributedDataParallel

        model.to(runtime.device)
        ids = [runtime.device.index] if runtime.device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=ids)
        facts["parallelism"] = "ddp"
    elif runtime.device.type == "cuda" and quantization == "none":
        model.to(runtime.device)
    from . import readmeter

    facts["checkpoint_bytes_read_per_rank"] = (
        runtime.gather_to_main(readmeter.bytes_read())
        if runtime.distributed
        else [readmeter.bytes_read()]
    )
    return model, facts


def unwrap(model: Any) -> Any:
    return model.module if hasattr(model, "module") and not hasattr(model, "peft_config") else model
