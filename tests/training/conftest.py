"""Training fixtures: one tiny Qwen2 model + tokenizer and a learnable dataset for the session."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from jupyter_hyperpod.training.synthetic import (
    build_random_model,
    small_tokenizer,
    write_synthetic_dataset,
)

REPO = Path(__file__).resolve().parents[2]

# Tuned so that a few dozen CPU steps visibly teach the tiny model the answers' pattern.
TRAIN_SETTINGS: dict[str, Any] = {
    "learning_rate": 1e-2,
    "per_device_train_batch_size": 4,
    "max_seq_length": 256,
    "system_prompt": "You answer questions.",
    "lora_r": 8,
    "lora_alpha": 16,
    "lora_dropout": 0.1,
    "max_new_tokens": 24,
    "eval_max_samples": 12,
    "per_device_eval_batch_size": 6,
    "log_system_metrics": False,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.training)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, hidden-64 Qwen2 with a 512-token BPE tokenizer carrying DeepSeek's specials."""
    target = tmp_path_factory.mktemp("tiny-qwen2")
    build_random_model(
        target, tokenizer=small_tokenizer(), hidden_size=64, num_layers=2, initializer_range=0.2
    )
    return target


@pytest.fixture(scope="session")
def dataset_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_dataset(tmp_path_factory.mktemp("dataset") / "reasoning.jsonl", 160)


def server_running_training(
    hyperpod_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The server config of a test whose jobs run `python -m jupyter_hyperpod.training` with
    this interpreter and this checkout, on one thread each, tracked in the partition's MLflow."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    )
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return {**hyperpod_config, "cluster_python": sys.executable}


def write_config(directory: Path, **values: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "args-fine-tuning.yaml"
    path.write_text(yaml.safe_dump({**TRAIN_SETTINGS, **values}, sort_keys=False))
    return path


@pytest.fixture
def project(tmp_path: Path, tiny_model: Path, dataset_file: Path) -> Path:
    """A project directory with a config using the tiny model and the synthetic dataset."""
    return write_config(
        tmp_path / "project",
        model_id=str(tiny_model),
        dataset=str(dataset_file),
        output_dir="model",
        train_dataset_path="data/train",
        test_dataset_path="data/test",
    )


def module_env(**extra: str) -> dict[str, str]:
    """Environment for `python -m jupyter_hyperpod.training` subprocesses."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("MLFLOW_TRACKING_URI", None)
    env.setdefault("OMP_NUM_THREADS", "1")  # tiny model: threads only spin on a shared machine
    env.update(extra)
    return env


def run_module(
    args: list[str], cwd: Path, *, torchrun: int = 0, timeout: float = 300, **env: str
) -> Any:
    import subprocess

    if torchrun:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={torchrun}",
            "-m",
            "jupyter_hyperpod.training",
            *args,
        ]
        env.setdefault("OMP_NUM_THREADS", "1")
    else:
        command = [sys.executable, "-m", "jupyter_hyperpod.training", *args]
    return subprocess.run(
        command,
        cwd=cwd,
        env=module_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
