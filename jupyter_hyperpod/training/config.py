"""The training configuration: the seed's `args-fine-tuning.yaml` keys, unchanged, plus ours.

Relative paths are resolved against the YAML file's directory, so a project on the shared file
system works wherever the cluster mounts it. `${VAR}` and `${VAR:-default}` expand from the
environment (the seed writes `mlflow_uri: "${MLFLOW_ARN}"`).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError
from .fsdp_config import normalize_fsdp_config

__all__ = ["ConfigError", "TrainingConfig", "config_from_dict", "load_config", "parse_overrides"]

log = logging.getLogger(__name__)

_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

DEFAULT_SYSTEM_PROMPT = (
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request. Before answering, think "
    "carefully about the question and create a step-by-step chain of thoughts to ensure a logical "
    "and accurate response."
)

DEFAULT_COLUMNS = {"question": "Question", "reasoning": "Complex_CoT", "response": "Response"}

PATH_KEYS = (
    "model_id",
    "output_dir",
    "train_dataset_path",
    "test_dataset_path",
    "dataset",
    "adapter_dir",
    "merged_dir",
    "eval_output",
)

# Hugging Face TrainingArguments keys that seed variants carry and that mean nothing to our loop.
_IGNORED_TRAINER_KEYS = {
    "report_to",
    "save_strategy",
    "evaluation_strategy",
    "eval_strategy",
    "logging_strategy",
    "optim",
    "ddp_find_unused_parameters",
    "remove_unused_columns",
    "dataloader_num_workers",
    "dataloader_pin_memory",
    "push_to_hub",
    "overwrite_output_dir",
    "logging_dir",
    "run_name",
}


@dataclass
class TrainingConfig:
    # --- The seed's keys (args-fine-tuning.yaml) ---
    model_id: str = ""
    """Base model: a local directory (on the shared FS) or, with `model_source`, where to put it."""
    output_dir: str = "model"
    train_dataset_path: str = "data/train"
    test_dataset_path: str = "data/test"
    mlflow_uri: str | None = None
    mlflow_experiment_name: str = "hyperpod-fine-tuning"
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.1
    learning_rate: float = 2e-4
    num_train_epochs: float = 1.0
    per_device_train_batch_size: int = 2
    per_device_eval_batch_size: int = 2
    gradient_accumulation_steps: int = 1
    gradient_checkpointing: bool = True
    bf16: bool = True
    tf32: bool = False
    fsdp: str = ""
    fsdp_config: dict[str, Any] = field(default_factory=dict)
    merge_weights: bool = False

    # --- Model download ---
    model_source: str | None = None
    """Hugging Face repo id to download into `model_id` when that directory is missing."""
    model_revision: str | None = None

    # --- Data preparation ---
    dataset: str | None = None
    """Source: a .json/.jsonl/.parquet file or directory, or a Hugging Face dataset id."""
    dataset_config: str | None = None
    dataset_split: str = "train"
    column_mapping: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_COLUMNS))
    """Our field -> the source's column: question (required), reasoning, response (required), system."""
    prompt_format: str = "deepseek-r1"
    """deepseek-r1 (the seed's prompt) or chat-template (the tokenizer's own)."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    test_size: float = 0.1
    data_seed: int = 42
    max_samples: int | None = None

    # --- Training ---
    quantization: str = "auto"
    """auto (nf4 where bitsandbytes runs, else none), nf4 (QLoRA, fails if impossible) or none (LoRA)."""
    lora_target_modules: str | list[str] = "all-linear"
    quant_storage: str = "auto"
    """Storage dtype of the packed 4-bit weights: auto (the compute dtype, what FSDP needs),
    bfloat16, float32 or uint8 (no FSDP)."""
    max_seq_length: int | None = None
    """Longest example in tokens. None: the model's context, like the seed (which tokenizes
    without truncation); with packing, the row length (2048 when None: the seed's chunk_size)."""
    packing: bool = False
    """Off (the seed's way): one example per row, padded per micro-batch, so an epoch has as many
    examples as the data. On: several examples share a row of max_seq_length tokens (each still
    sees only itself), so there are fewer, fuller rows: fewer steps and far less padding."""
    max_steps: int = -1
    lr_scheduler_type: str = "linear"
    warmup_ratio: float = 0.0
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    seed: int = 42
    logging_steps: int = 1
    save_steps: int = 50
    """Checkpoint every N optimizer steps (0: only at the end)."""
    save_total_limit: int = 2
    resume: str = "auto"
    """auto (from the last checkpoint in output_dir), never, or a checkpoint directory."""
    adapter_dir: str | None = None
    merged_dir: str | None = None
    log_system_metrics: bool = True

    # --- Evaluation ---
    eval_max_samples: int | None = 100
    max_new_tokens: int | None = None
    """Generation length; None: the longest answer of the evaluated test examples (+10%), so
    that no answer is cut (long reasoning chains need thousands of tokens)."""
    eval_base: bool = True
    eval_output: str | None = None

    # --- Not from YAML ---
    config_dir: str = field(default=".", repr=False)

    def __post_init__(self) -> None:
        self.validate()

    # Derived paths -------------------------------------------------------------------------
    @property
    def adapter_path(self) -> Path:
        return Path(self.adapter_dir or Path(self.output_dir) / "adapter")

    @property
    def merged_path(self) -> Path:
        return Path(self.merged_dir or Path(self.output_dir) / "merged")

    @property
    def checkpoints_path(self) -> Path:
        return Path(self.output_dir) / "checkpoints"

    @property
    def eval_output_path(self) -> Path:
        return Path(self.eval_output or Path(self.output_dir) / "eval" / "rouge.json")

    @property
    def fsdp_options(self) -> set[str]:
        return set(self.fsdp.split()) if self.fsdp else set()

    def validate(self) -> None:
        checks: list[tuple[bool, str, str]] = [
            (self.lora_r >= 1, "lora_r", "must be at least 1"),
            (0.0 <= self.lora_dropout < 1.0, "lora_dropout", "must be in [0, 1)"),
            (self.learning_rate > 0, "learning_rate", "must be positive"),
            (self.per_device_train_batch_size >= 1, "per_device_train_batch_size", "must be >= 1"),
            (self.per_device_eval_batch_size >= 1, "per_device_eval_batch_size", "must be >= 1"),
            (self.gradient_accumulation_steps >= 1, "gradient_accumulation_steps", "must be >= 1"),
            (
                self.max_seq_length is None or self.max_seq_length >= 16,
                "max_seq_length",
                "must be at least 16",
            ),
            (
                self.max_new_tokens is None or self.max_new_tokens >= 1,
                "max_new_tokens",
                "must be at least 1",
            ),
            (
                self.quant_storage in ("auto", "bfloat16", "float16", "float32", "uint8"),
                "quant_storage",
                "must be auto, bfloat16, float16, float32 or uint8",
            ),
            (0.0 < self.test_size < 1.0, "test_size", "must be between 0 and 1"),
            (
                self.prompt_format in ("deepseek-r1", "chat-template"),
                "prompt_format",
                "must be deepseek-r1 or chat-template",
            ),
            (
                self.quantization in ("auto", "nf4", "none"),
                "quantization",
                "must be auto, nf4 or none",
            ),
            (
                self.lr_scheduler_type in ("linear", "cosine", "constant"),
                "lr_scheduler_type",
                "must be linear, cosine or constant",
            ),
            (self.save_steps >= 0, "save_steps", "must be >= 0"),
            (self.logging_steps >= 1, "logging_steps", "must be >= 1"),
            (
                self.num_train_epochs > 0 or self.max_steps > 0,
                "num_train_epochs",
                "must be positive (or set max_steps)",
            ),
        ]
        for ok, key, message in checks:
            if not ok:
                raise ConfigError(f"{key} {message}")
        unknown = self.fsdp_options - {
            "full_shard",
            "shard_grad_op",
            "auto_wrap",
            "offload",
            "no_shard",
        }
        if unknown:
            raise ConfigError(f"fsdp: unknown option(s) {sorted(unknown)}")
        for name in ("question", "response"):
            if not self.column_mapping.get(name):
                raise ConfigError(
                    f"column_mapping needs '{name}' (the source column to read it from)"
                )

    def to_params(self) -> dict[str, str]:
        """Flat, stringified parameters for MLflow."""
        params: dict[str, str] = {}
        for item in dataclasses.fields(self):
            if item.name in ("config_dir", "system_prompt"):
                continue
            value = getattr(self, item.name)
            if isinstance(value, dict):
                for key, sub in value.items():
                    params[f"{item.name}.{key}"] = str(sub)[:250]
            else:
                params[item.name] = str(value)[:250]
        return params


def expand_env(value: Any) -> Any:
    if isinstance(value, str):
        return _ENV_PATTERN.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, dict):
        return {key: expand_env(item) for key, item in value.items()}
    if isinstance(value, list):
        return [expand_env(item) for item in value]
    return value


def _coerce(name: str, value: Any, default: Any) -> Any:
    """YAML gives `2e-4` as a string (YAML 1.1): coerce to the field's type, naming the key if wrong."""
    if value is None:
        return None
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "yes", "no", "1", "0"):
                    raise ValueError
                return value.lower() in ("true", "yes", "1")
            return bool(value)
        if isinstance(default, int):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(float(value)) if isinstance(value, str) else int(value)
        if isinstance(default, float):
            return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: {value!r} is not a valid {type(default).__name__}") from None
    return value


def config_from_dict(data: dict[str, Any], config_dir: str | Path = ".") -> TrainingConfig:
    data = expand_env(dict(data))
    known = {
        item.name: item for item in dataclasses.fields(TrainingConfig) if item.name != "config_dir"
    }
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            if key in _IGNORED_TRAINER_KEYS:
                log.warning(
                    "config key '%s' is a Hugging Face Trainer option with no effect here", key
                )
                continue
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"unknown config key '{key}'{hint}")
        item = known[key]
        default = item.default if item.default is not dataclasses.MISSING else None
        if isinstance(default, (bool, int, float)) or item.name in (
            "max_samples",
            "eval_max_samples",
            "max_seq_length",
            "max_new_tokens",
        ):
            value = _coerce(key, value, default if default is not None else 0)
        if key in ("mlflow_uri", "dataset_config", "dataset") and value == "":
            value = None
        if key == "column_mapping":
            value = _column_mapping(value)
        if key == "fsdp_config":
            value = normalize_fsdp_config(value)
        if key == "fsdp" and isinstance(value, list):
            value = " ".join(value)
        keep_none = key in ("mlflow_uri", "dataset_config", "dataset")
        values[key] = value if value is not None or keep_none else item.default
    base = Path(config_dir).resolve()
    for key in PATH_KEYS:
        value = values.get(key)
        if isinstance(value, str) and value and not _looks_remote(key, value, base, values):
            values[key] = str((base / os.path.expanduser(value)).resolve())
    for key in ("output_dir", "train_dataset_path", "test_dataset_path"):
        if key not in values:
            values[key] = str((base / getattr(TrainingConfig, key)).resolve())
    values.setdefault("fsdp_config", {})
    values["fsdp_config"] = values["fsdp_config"] or {}
    return TrainingConfig(**values, config_dir=str(base))


COLUMN_FIELDS = ("question", "reasoning", "response", "system")


def _column_mapping(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError("column_mapping must be a mapping like {question: Question, ...}")
    for key in value:
        if key not in COLUMN_FIELDS:
            close = difflib.get_close_matches(str(key), COLUMN_FIELDS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(
                f"unknown config key 'column_mapping.{key}'{hint}: the fields are "
                f"{', '.join(COLUMN_FIELDS)}"
            )
    # A field mapped to null/"" is dropped (e.g. reasoning: null for data without one).
    merged = {**DEFAULT_COLUMNS, **value}
    return {k: str(v) for k, v in merged.items() if v}


def _looks_remote(key: str, value: str, base: Path, values: dict[str, Any]) -> bool:
    """A hub id ('org/name') stays as is when nothing exists at that path (model_id: unless
    `model_source` names the repo, when model_id is where the snapshot goes)."""
    if key not in ("model_id", "dataset") or (key == "model_id" and values.get("model_source")):
        return False
    if value.startswith((".", "/", "~")) or (base / value).exists():
        return False
    if Path(value).suffix in (".json", ".jsonl", ".parquet", ".arrow", ".csv"):
        return False  # a data file's name: a mistyped path, not a repo id
    if (base / value.split("/", 1)[0]).is_dir():
        return False  # its first part is a local directory (data/x.jsonl with data/ here)
    return bool(re.fullmatch(r"[\w.-]+/[\w.-]+", value))


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """`--set key=value` items, values parsed as YAML (numbers, booleans, lists)."""
    overrides: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        overrides[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
    return overrides


def live_directory(directory: Path) -> Path:
    """Where a config's relative paths point: for a config the job reads from its snapshot
    (#24), the same place in the job's workdir, so data, the prepared splits and the outputs
    are the partition's, not copies inside the snapshot; elsewhere `directory` itself."""
    tree, workdir = os.environ.get("HYPERPOD_SNAPSHOT"), os.environ.get("HYPERPOD_WORKDIR")
    if not tree or not workdir:
        return directory
    try:
        inside = directory.relative_to(Path(tree).resolve())
    except ValueError:
        return directory
    return Path(workdir) / inside


def load_config(path: str | Path | None, overrides: dict[str, Any] | None = None) -> TrainingConfig:
    data: dict[str, Any] = {}
    config_dir: Path = Path.cwd()
    if path:
        file = Path(path)
        if not file.is_file():
            raise ConfigError(f"config file not found: {file}")
        loaded = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{file}: the config must be a YAML mapping")
        data.update(loaded)
        config_dir = live_directory(file.resolve().parent)
    data.update(overrides or {})
    return config_from_dict(data, config_dir)
