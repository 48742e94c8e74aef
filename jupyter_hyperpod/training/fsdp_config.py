"""The `fsdp_config` mapping of the seed's YAML (Hugging Face TrainingArguments' keys), checked.

Each key Hugging Face accepts is either honoured by our FSDP2 set-up or refused with the reason;
anything else is a typo and gets the did-you-mean error. Like Hugging Face, a `fsdp_` prefix on a
key is dropped (`fsdp_offload_params` is `offload_params`): transformers' `TrainingArguments.
__post_init__` strips it the same way.
"""

from __future__ import annotations

import difflib
from typing import Any

from .errors import ConfigError

BOOL_KEYS = {
    "offload_params": "parameters, gradients and optimizer state in CPU memory (GPU only)",
    "forward_prefetch": "all-gather the next block's parameters during this block's forward",
    "cpu_ram_efficient_loading": "rank 0 reads the checkpoint; the others start on the meta "
    "device and receive only their shards from rank 0",
    "sync_module_states": "every rank starts from rank 0's weights (always true here)",
    "use_orig_params": "FSDP2 always keeps the original parameters (true is the only mode)",
    "activation_checkpointing": "recompute activations in backward (same as "
    "gradient_checkpointing)",
    "limit_all_gathers": "FSDP2 always bounds in-flight all-gathers (true is the only mode)",
    "reshard_after_forward": "free gathered parameters after forward (full_shard) or keep them "
    "until backward (shard_grad_op)",
}
BACKWARD_PREFETCH = ("backward_pre", "no_prefetch")
STATE_DICT_TYPES = ("FULL_STATE_DICT", "SHARDED_STATE_DICT")
KNOWN = (
    *BOOL_KEYS,
    "backward_prefetch",
    "transformer_layer_cls_to_wrap",
    "min_num_params",
    "version",
    "state_dict_type",
)


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"fsdp_config.{key}: {value!r} is not true or false")


def normalize_fsdp_config(raw: Any) -> dict[str, Any]:
    """The checked mapping (prefix dropped, types fixed); ConfigError naming the key otherwise."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError("fsdp_config must be a mapping like {offload_params: true, ...}")
    config: dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key)
        if name.startswith("fsdp_") and name[5:] in KNOWN:
            name = name[5:]
        if name not in KNOWN:
            close = difflib.get_close_matches(name, KNOWN, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"unknown config key 'fsdp_config.{key}'{hint}")
        config[name] = _check(name, value)
    if config.get("cpu_ram_efficient_loading") and config.get("sync_module_states") is False:
        # The same rule as transformers' TrainingArguments: without the sync the ranks that did
        # not read the checkpoint would train on uninitialised weights.
        raise ConfigError(
            "fsdp_config.sync_module_states: must be true with cpu_ram_efficient_loading "
            "(the ranks that skip reading the checkpoint get their weights from rank 0)"
        )
    return config


def _check(name: str, value: Any) -> Any:
    if name in BOOL_KEYS:
        flag = _bool(name, value)
        if name == "use_orig_params" and not flag:
            raise ConfigError(
                "fsdp_config.use_orig_params: false is refused: this module shards with FSDP2, "
                "which has no flat parameters (and LoRA's mix of frozen and trainable weights "
                "needs the original ones): remove the key or set it to true"
            )
        if name == "limit_all_gathers" and not flag:
            raise ConfigError(
                "fsdp_config.limit_all_gathers: false is refused: FSDP2 always limits the "
                "all-gathers in flight; remove the key"
            )
        return flag
    if name == "backward_prefetch":
        text = "no_prefetch" if value in (None, False) else str(value).lower()
        if text == "backward_post":
            raise ConfigError(
                "fsdp_config.backward_prefetch: backward_post is refused: FSDP2 prefetches a "
                "block's parameters only before its backward (backward_pre)"
            )
        if text not in BACKWARD_PREFETCH:
            raise ConfigError(f"fsdp_config.backward_prefetch: must be one of {BACKWARD_PREFETCH}")
        return text
    if name == "transformer_layer_cls_to_wrap":
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(
                "fsdp_config.transformer_layer_cls_to_wrap: a class name or a list of them"
            )
        return [n.strip() for item in names for n in item.split(",") if n.strip()]
    if name == "min_num_params":
        raise ConfigError(
            "fsdp_config.min_num_params is refused: size-based wrapping is not supported (each "
            "transformer block is one FSDP unit); name blocks with transformer_layer_cls_to_wrap"
        )
    if name == "version":
        if str(value) != "2":
            raise ConfigError(
                "fsdp_config.version: only 2 is supported (this module shards with FSDP2)"
            )
        return 2
    # state_dict_type: checkpoints are always sharded (torch.distributed.checkpoint) and the final
    # adapter is always written whole, which is what both settings ask for at the end.
    text = str(value).upper()
    if text not in STATE_DICT_TYPES:
        raise ConfigError(f"fsdp_config.state_dict_type: must be one of {STATE_DICT_TYPES}")
    return text
