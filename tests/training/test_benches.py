"""The benchmarks' own arithmetic (the benchmarks themselves run from bench/, never as tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from .conftest import REPO


def load(path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_step_time_pairs_each_steps_tokens_with_its_own_time() -> None:
    bench = load(REPO / "bench/training/step_time.py")
    # Step i ends at ends[i]: steps 2 and 3 (after 2 warm-up steps) took 2 s and 3 s.
    ends = [0.0, 1.0, 3.0, 6.0]
    tokens = [999, 999, 30, 60]
    step, rate = bench.paired(ends, tokens)
    assert step == pytest.approx(2.5)
    assert rate == pytest.approx((30 / 2 + 60 / 3) / 2)  # 15 and 20 tokens/s, not 30/3 or 60/2


def test_the_gpu_bench_verdict_names_the_storage_to_use() -> None:
    bench = load(REPO / "bench/gpu/qlora_fsdp.py")
    ok = [{"case": "qlora-fsdp", "fsdp_max_abs_diff": 0.0}]
    assert "not seen here" in bench.verdict_1945(ok)
    bites = [
        {"case": "qlora-fsdp", "fsdp_max_abs_diff": 3.5},
        {"case": "qlora-fsdp-fp32-storage", "fsdp_max_abs_diff": 0.0},
    ]
    assert bench.verdict_1945(bites).endswith("set quant_storage: float32")
