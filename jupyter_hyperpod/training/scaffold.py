"""Write a fine-tuning project on the shared file system: a config plus thin entry scripts.

The layout mirrors the seed's repository (download_model.py, scripts/dataprep.py,
scripts/train.py, scripts/evaluation.py, args-fine-tuning.yaml) so its walkthrough applies; each
script only calls this package, so the logic stays versioned with the extension.
"""

from __future__ import annotations

from pathlib import Path

from .config import DEFAULT_SYSTEM_PROMPT

CONFIG_NAME = "args-fine-tuning.yaml"

KNOWN_DATASET_CONFIGS = {
    # The seed's dataset has configs en, zh, en_mix and zh_mix and no default: loading it
    # without one fails ("Config name is missing").
    "FreedomIntelligence/medical-o1-reasoning-SFT": "en",
}

CONFIG_TEMPLATE = """\
# Fine-tuning config (the seed's keys, plus ours). Relative paths are relative to this file, so the
# project works wherever the cluster mounts the shared file system. Submit it with the
# "QLoRA fine-tune" template (config: {config_path}) or run a step by hand:
#   python -m jupyter_hyperpod.training train --config {config_name}

# Base model: a directory on the shared file system; with model_source set, the train (or
# download) step fetches that Hugging Face repo into it first.
model_id: {model_dir}
model_source: {model_source}
# MLflow: a server URL or a SageMaker MLflow ARN; empty = the cluster's default (the panel shows it)
mlflow_uri: ""
mlflow_experiment_name: "fine-tuning"
output_dir: "model/"
train_dataset_path: "data/train/"
test_dataset_path: "data/test/"

# Data preparation (runs before training when data/train is missing)
dataset: {dataset}
dataset_config: {dataset_config}    # hub datasets with several configs (the seed's: en)
dataset_split: train
column_mapping:
  question: Question
  reasoning: Complex_CoT
  response: Response
prompt_format: deepseek-r1          # or chat-template (the tokenizer's own)
system_prompt: "{system_prompt}"
test_size: 0.1
data_seed: 42

# LoRA / QLoRA
quantization: auto                  # auto | nf4 (QLoRA) | none (LoRA)
lora_r: 8
lora_alpha: 16
lora_dropout: 0.1
lora_target_modules: all-linear

# Training
learning_rate: 2e-4
num_train_epochs: 1
max_steps: -1
per_device_train_batch_size: 2
per_device_eval_batch_size: 2
gradient_accumulation_steps: 2
gradient_checkpointing: true
bf16: true
tf32: false
# Sequence length and packing. Like the seed, each example is one row (padded per micro-batch)
# and nothing is cut: max_seq_length null = the model's context. packing: true puts several
# examples in one row of max_seq_length tokens (2048 when null); each example still attends
# only to itself, but an epoch has fewer, fuller rows: fewer optimizer steps (different
# learning-rate schedule and batch composition) and much less padding to compute.
max_seq_length: null
packing: false
save_steps: 50                      # checkpoint every N steps; a restarted job resumes from the last
save_total_limit: 2
fsdp: "full_shard auto_wrap offload"
fsdp_config:
  backward_prefetch: "backward_pre"
  cpu_ram_efficient_loading: true
  offload_params: true
  forward_prefetch: false
  use_orig_params: true
merge_weights: true

# Evaluation (ROUGE-1/2/L/Lsum, the merged fine-tuned model vs the full-precision base)
eval_max_samples: 100
max_new_tokens: null                # null: the longest test answer + 10% (no answer is cut)
"""

SCRIPT_TEMPLATE = '''\
"""{doc}

Thin entry point: the logic lives in jupyter_hyperpod.training. Usage:
    python {script} --config {config_rel} [--set key=value ...]
"""

import sys
from pathlib import Path

from jupyter_hyperpod.training.__main__ import main

if __name__ == "__main__":
    args = sys.argv[1:] or ["--config", str(Path(__file__).resolve().parent / "{config_rel}")]
    sys.exit(main(["{step}", *args]))
'''

SCRIPTS = {
    "download_model.py": ("download", "Download the base model to the shared file system."),
    "scripts/dataprep.py": ("dataprep", "Format the dataset (DeepSeek-R1 prompt) and split it."),
    "scripts/train.py": ("train", "QLoRA fine-tuning (FSDP under torchrun), with auto-resume."),
    "scripts/evaluation.py": ("evaluate", "ROUGE of the fine-tuned model vs the base model."),
}

README = """\
# Fine-tuning project

- `{config_name}`: every setting (the seed's keys load unchanged).
- `download_model.py`, `scripts/dataprep.py`, `scripts/train.py`, `scripts/evaluation.py`: the
  steps, each a thin call into `jupyter_hyperpod.training`.

Submit from JupyterLab with the "QLoRA fine-tune" template, then "Evaluate (ROUGE)", both with
config `{config_path}`. By hand, on a node: `torchrun --nproc-per-node=<gpus> scripts/train.py`.
Checkpoints go to `model/checkpoints/` every `save_steps`; a restarted job resumes from the last.
"""


def scaffold_project(
    directory: str | Path,
    *,
    model_id: str | None = None,
    dataset: str | None = None,
    dataset_config: str | None = None,
    force: bool = False,
    relative_to: str | Path | None = None,
) -> list[Path]:
    """Write the project; refuses to overwrite files unless `force`. Returns the files written."""
    root = Path(directory)
    config_path = root / CONFIG_NAME
    shown = str(config_path.relative_to(relative_to)) if relative_to else str(config_path)
    # A local model: a directory as given, or relative to the project (where the config's
    # relative paths point); anything else is a hub id the download step fetches.
    local_model = bool(model_id) and (
        Path(str(model_id)).expanduser().is_dir() or (root / str(model_id)).is_dir()
    )
    files = {
        CONFIG_NAME: CONFIG_TEMPLATE.format(
            config_path=shown,
            config_name=CONFIG_NAME,
            model_dir=_yaml_str(model_id if local_model else "models/base"),
            model_source=_yaml_str(None if local_model else model_id),
            dataset=_yaml_str(dataset),
            dataset_config=_yaml_str(dataset_config or KNOWN_DATASET_CONFIGS.get(dataset or "")),
            system_prompt=DEFAULT_SYSTEM_PROMPT.replace('"', "'"),
        ),
        "README.md": README.format(config_name=CONFIG_NAME, config_path=shown),
    }
    for script, (step, doc) in SCRIPTS.items():
        depth = script.count("/")
        config_rel = "../" * depth + CONFIG_NAME
        files[script] = SCRIPT_TEMPLATE.format(
            doc=doc, script=script, config_rel=config_rel, step=step
        )
    existing = [name for name in files if (root / name).exists()]
    if existing and not force:
        raise FileExistsError(
            f"{root} already has {', '.join(existing)} (use --force to overwrite)"
        )
    written = []
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    for sub in ("data", "models", "model"):
        (root / sub).mkdir(exist_ok=True)
    return written


def _yaml_str(value: str | None) -> str:
    if not value:
        return "null"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
