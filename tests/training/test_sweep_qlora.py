"""A 2x2 sweep of the QLoRA demo (#24 items 3 and 5), through the real server on the local
backend: qlora-finetune trains the tiny model on CPU for a few steps at learning_rate x lora_r,
at most 2 members at once (the local queue would start 4). All 4 succeed; never more than 2 ran
at once; the group row counts them and names the member with the lowest last loss, which is the
lowest of the members' own MLflow losses."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from ..helpers import Api
from .conftest import server_running_training, write_config

STEPS = 2


@pytest.fixture
def hyperpod_config(
    hyperpod_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    return {**server_running_training(hyperpod_config, monkeypatch), "local_max_parallel_jobs": 4}


async def test_a_2x2_qlora_sweep_capped_at_2(
    api: Api, partition: Path, tiny_model: Path, dataset_file: Path
) -> None:
    write_config(
        partition / "proj",
        model_id=str(tiny_model),
        dataset=str(dataset_file),
        seed=1234,
        output_dir="out/${HYPERPOD_JOB_ID}",
    )
    reply = await api.post(
        "sweeps",
        {
            "name": "qlora",
            "template": "qlora-finetune",
            "params": {
                "config": "proj/args-fine-tuning.yaml",
                "max_steps": STEPS,
                "save_steps": 0,
                "procs_per_node": 1,
            },
            "sweep": {"learning_rate": [1e-4, 5e-2], "lora_r": [8, 16]},
            "max_concurrent": 2,
        },
    )
    assert reply.status == 201, reply.body
    sweep_id = reply.body["summary"]["id"]
    assert [job["name"] for job in reply.body["jobs"]] == [
        "qlora-lr1e-4-r8",
        "qlora-lr1e-4-r16",
        "qlora-lr0p05-r8",
        "qlora-lr0p05-r16",
    ]
    assert [job["held"] is not None for job in reply.body["jobs"]] == [False, False, True, True]

    most_running = 0
    deadline = time.monotonic() + 300
    while True:
        found = (await api.get(f"sweeps/{sweep_id}")).body
        running = [job for job in found["jobs"] if job["state"] == "RUNNING"]
        most_running = max(most_running, len(running))
        if found["summary"]["progress"] == 1 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.25)
    summary = found["summary"]
    assert summary["state"] == "SUCCEEDED", found
    assert summary["counts"]["SUCCEEDED"] == 4 and summary["counts"]["waiting"] == 0
    assert most_running <= 2
    # From the server's own records: at each member's start, at most 2 had started and not ended.
    spans = [(job["started"], job["ended"]) for job in found["jobs"]]
    at_once = max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)
    assert at_once == 2, spans

    last_losses = {}
    for job in found["jobs"]:
        metrics = (await api.get(f"jobs/{job['id']}/metrics")).body
        points = metrics["metrics"]["loss"]
        assert [point["step"] for point in points] == list(range(1, STEPS + 1))
        last_losses[job["id"]] = points[-1]["value"]
    best = summary["best"]
    assert best is not None and summary["metric"] == "loss"
    assert best["value"] == min(last_losses.values())
    assert best["job_id"] == min(last_losses, key=last_losses.__getitem__)
    assert best["step"] == STEPS
    assert set(best["point"]) == {"learning_rate", "lora_r"}
    # Each member trained with its own point (its own outputs, its spec's params).
    for job in found["jobs"]:
        point = job["spec"]["sweep"]["point"]
        assert job["spec"]["params"]["learning_rate"] == point["learning_rate"]
        assert (partition / "proj" / "out" / job["id"] / "adapter").is_dir()
    # The comparison view takes the members' ids.
    compared = await api.get("compare", ids=",".join(summary["members"]))
    assert compared.status == 200, compared.body
    assert [job["id"] for job in compared.body["jobs"]] == summary["members"]
