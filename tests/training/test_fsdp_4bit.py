"""FSDP2 + 4-bit guard (bitsandbytes #1945): sharded and unsharded Linear4bit outputs agree."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, run_module


def checked(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(next(line for line in result.stdout.splitlines() if line.startswith("{")))


def test_sharded_and_unsharded_4bit_outputs_agree_on_two_ranks(
    tmp_path: Path, tiny_model: Path
) -> None:
    # The tiny model as training loads it on CPU: NF4 stored in the compute dtype (float32).
    config = tmp_path / "c.yaml"
    config.write_text(f"model_id: {tiny_model}\n")
    model = checked(
        run_module(
            ["fsdp-check", "--config", str(config), "--storage", "float32"], tmp_path, torchrun=2
        )
    )
    assert model["mode"] == "model" and model["world_size"] == 2
    assert model["max_abs_diff"] == {"float32": 0.0}

    # The GPU configuration on CPU kernels: bf16 compute, bf16 storage (what #1945 reports
    # wrong on CUDA), and float32 storage (the fallback: FSDP then leaves parameters uncast).
    synthetic = checked(
        run_module(
            ["fsdp-check", "--compute", "bfloat16", "--storage", "bfloat16,float32"],
            tmp_path,
            torchrun=2,
        )
    )
    assert synthetic["compute_dtype"] == "bfloat16" and "errors" not in synthetic
    assert synthetic["max_abs_diff"] == {"bfloat16": 0.0, "float32": 0.0}
    assert synthetic["local_fraction"] == {"bfloat16": 0.5, "float32": 0.5}  # really sharded


def test_the_gpu_bench_check_needs_no_torchrun_on_path(tmp_path: Path) -> None:
    """`--check` reports what is missing here (a GPU), never torchrun: the bench launches
    `python -m torch.distributed.run` with its own interpreter."""
    bin_dir = tmp_path / "bin"  # a PATH with nothing on it: no torchrun, no python
    bin_dir.mkdir()
    env = {"PATH": str(bin_dir), "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(REPO / "bench/gpu/qlora_fsdp.py"), "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    assert "torchrun" not in output, output
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:  # pragma: no cover - the training extra is installed for these tests
        has_gpu = False
    if has_gpu:
        assert result.returncode == 0 and "ready:" in output, output
    else:
        assert result.returncode == 2 and "no CUDA GPU visible to torch" in output, output

    # The bench's own launcher runs a distributed job with that empty PATH.
    spec = importlib.util.spec_from_file_location("qlora_fsdp", REPO / "bench/gpu/qlora_fsdp.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    command = [*bench.launcher(1), "fsdp-check", "--storage", "float32"]
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    job = subprocess.run(
        command,
        env={**env, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert checked(job)["max_abs_diff"] == {"float32": 0.0}


@pytest.mark.parametrize("storage", ["auto", "float32"])
def test_fsdp_casts_parameters_only_when_the_4bit_storage_is_the_compute_dtype(
    storage: str,
) -> None:
    import torch

    from jupyter_hyperpod.training.config import config_from_dict
    from jupyter_hyperpod.training.model import casts_params_safely

    config = config_from_dict({"quant_storage": storage})
    assert casts_params_safely(config, torch.bfloat16) is (storage == "auto")


def test_training_stops_before_the_load_when_sharding_changes_4bit_outputs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a GPU hit by #1945 would give the guard (its measurement is the CPU test above)."""
    import torch

    from jupyter_hyperpod.training import fsdp_sharding
    from jupyter_hyperpod.training.config import ConfigError
    from jupyter_hyperpod.training.model import check_fsdp_4bit
    from jupyter_hyperpod.training.runtime import Runtime

    runtime = Runtime(0, 0, 1, 1, torch.device("cpu"), True)
    monkeypatch.setattr(fsdp_sharding, "synthetic_difference", lambda *a, **k: (2.5, 0.5))
    with pytest.raises(
        ConfigError, match=r"bfloat16 on this cpu .*#1945\): set quant_storage: float32"
    ):
        check_fsdp_4bit(runtime, torch.bfloat16, torch.bfloat16)
    monkeypatch.setattr(fsdp_sharding, "synthetic_difference", lambda *a, **k: (0.0, 0.5))
    assert check_fsdp_4bit(runtime, torch.bfloat16, torch.bfloat16) == 0.0
