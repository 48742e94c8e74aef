"""The seed's args-fine-tuning.yaml, unchanged: its defaults, its fsdp_config, its data files."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from jupyter_hyperpod.training.batching import make_plan, tokenize_records
from jupyter_hyperpod.training.config import ConfigError, load_config
from jupyter_hyperpod.training.dataprep import deepseek_r1_completion, deepseek_r1_prompt
from jupyter_hyperpod.training.synthetic import synthetic_rows

from .conftest import run_module
from .test_data import SEED_YAML


def seed_project(tmp_path: Path, tiny_model: Path, count: int = 48, **replace: str) -> Path:
    """The seed's YAML with only its /data/... paths moved here, and its data prepared the
    seed's way: a `text` column written by `datasets`' to_json (JSON Lines in dataset.json)."""
    from datasets import Dataset

    root = tmp_path / "seed"
    text = SEED_YAML
    text = text.replace(
        "/data/Data-Scientist/deepseek-r1-distill-qwen-14b/DeepSeek-R1-Distill-Qwen-14B",
        str(tiny_model),
    )
    text = text.replace("/data/Data-Scientist/deepseek-r1-distill-qwen-14b/", str(root) + "/")
    for old, new in replace.items():
        text = text.replace(old, new)
    root.mkdir(parents=True)
    (root / "args-fine-tuning.yaml").write_text(text)
    rows = [
        {
            "text": deepseek_r1_prompt("You answer questions.", r["Question"])
            + deepseek_r1_completion(r["Complex_CoT"], r["Response"])
        }
        for r in synthetic_rows(count + 8)
    ]
    Dataset.from_list(rows[:count]).to_json(str(root / "data/train/dataset.json"))
    Dataset.from_list(rows[count:]).to_json(str(root / "data/test/dataset.json"))
    return root / "args-fine-tuning.yaml"


def test_the_seed_yaml_trains_every_example_once_per_epoch(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoTokenizer

    monkeypatch.delenv("MLFLOW_ARN", raising=False)
    config = load_config(seed_project(tmp_path, tiny_model, count=360))
    assert config.packing is False and config.max_seq_length is None
    assert config.fsdp_config == {
        "backward_prefetch": "backward_pre",
        "cpu_ram_efficient_loading": True,
        "offload_params": True,
        "forward_prefetch": False,
        "use_orig_params": True,
    }
    from jupyter_hyperpod.training.dataprep import read_split

    records = read_split(config.train_dataset_path)  # the to_json file: JSON Lines in .json
    assert len(records) == 360
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    examples, dropped = tokenize_records(records, tokenizer, 1 << 20)
    plan = make_plan(
        examples,
        packing=config.packing,
        max_length=1 << 20,
        micro_batch_size=config.per_device_train_batch_size,
        world_size=8,
        accumulation=config.gradient_accumulation_steps,
        seed=config.seed,
    )
    # 360 examples -> 360 rows, as the seed's Trainer sees them (not 38 packed rows).
    assert dropped == 0 and len(plan.rows) == 360
    assert plan.steps_per_epoch == 12  # ceil(360 / (2 per device x 8 ranks x 2 accumulated))


def test_fsdp_config_keys_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"

    def load(fsdp_config: str) -> dict:
        path.write_text(f"model_id: m\nfsdp: full_shard auto_wrap\nfsdp_config:\n{fsdp_config}")
        return load_config(path).fsdp_config

    with pytest.raises(ConfigError, match=r"fsdp_config.backward_prefech.*'backward_prefetch'"):
        load("  backward_prefech: backward_pre\n")
    with pytest.raises(ConfigError, match="offload_params: 'yes please' is not true or false"):
        load("  offload_params: yes please\n")
    with pytest.raises(ConfigError, match="backward_post is refused: FSDP2"):
        load("  backward_prefetch: backward_post\n")
    with pytest.raises(ConfigError, match="use_orig_params: false is refused"):
        load("  use_orig_params: false\n")
    with pytest.raises(ConfigError, match="min_num_params is refused"):
        load("  min_num_params: 100000\n")
    with pytest.raises(ConfigError, match="sync_module_states: must be true"):
        load("  cpu_ram_efficient_loading: true\n  sync_module_states: false\n")
    # Hugging Face's fsdp_ prefix is dropped, as TrainingArguments does.
    assert load("  fsdp_offload_params: true\n  fsdp_transformer_layer_cls_to_wrap: A,B\n") == {
        "offload_params": True,
        "transformer_layer_cls_to_wrap": ["A", "B"],
    }
    path.write_text("model_id: m\ncolumn_mapping:\n  qestion: Q\n")
    with pytest.raises(ConfigError, match=r"column_mapping.qestion.*'question'"):
        load_config(path)


def test_a_config_error_at_train_time_is_a_clean_exit_2(project: Path) -> None:
    started = time.monotonic()
    run = run_module(
        ["train", "--config", project.name, "--set", "column_mapping={question: Nope}"],
        project.parent,
    )
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert "configuration error: column_mapping.question: column 'Nope' not in the data" in (
        run.stdout
    )
    assert "Traceback" not in run.stdout + run.stderr
    assert "Loading weights" not in run.stdout + run.stderr  # before any model load
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_cpu_ram_efficient_loading_reads_the_checkpoint_once(
    tmp_path: Path, tiny_model: Path
) -> None:
    """2 ranks, the seed's fsdp/fsdp_config: rank 0 reads the weights, rank 1 reads nothing,
    and the run is the same as with every rank reading the checkpoint."""
    from safetensors import safe_open

    total = 0
    for file in tiny_model.glob("*.safetensors"):
        with safe_open(str(file), "pt") as handle:
            total += sum(handle.get_tensor(k).nbytes for k in handle.keys())  # noqa: SIM118
    summaries = {}
    for efficient in ("true", "false"):
        config = seed_project(
            tmp_path / efficient,
            tiny_model,
            **{"cpu_ram_efficient_loading: true": f"cpu_ram_efficient_loading: {efficient}"},
        )
        run = run_module(
            [
                "train",
                "--config",
                str(config),
                "--set",
                "max_steps=4",
                "--set",
                "merge_weights=false",
                "--set",
                "learning_rate=0.01",
                "--set",
                "log_system_metrics=false",
            ],
            config.parent,
            torchrun=2,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        summaries[efficient] = json.loads((config.parent / "model/train_results.json").read_text())
    fast, slow = summaries["true"], summaries["false"]
    assert fast["cpu_ram_efficient_loading"] is True and fast["quantization"] == "nf4"
    assert fast["checkpoint_bytes_read_per_rank"] == [total, 0]
    assert slow["checkpoint_bytes_read_per_rank"] == [total, total]
    assert fast["final_loss"] == slow["final_loss"]  # the same weights on every rank
    assert fast["train_examples"] == fast["rows"] == 48  # no packing: every example, one row
    assert fast["backward_prefetch"] == "backward_pre" and fast["parallelism"] == "fsdp"
    # The #1945 guard ran before the load, on both ranks, and found no difference on CPU.
    assert fast["fsdp_4bit_check_max_abs_diff"] == 0.0
    log = fast["step_log"]  # each step's end and its own tokens (what the benches pair)
    assert len(log["ends"]) == len(log["padded_tokens"]) == 4
