"""Rerun exactly reproduces a training run bit for bit (#24 items 2 and 5), through the real
server on the local backend: the qlora-finetune template trains the tiny model on CPU with a
fixed seed; the config is then edited in the workdir. `rerun` (the submit's snapshot) logs the
very same loss floats as the first job, step by step; `rerun with_changes` (the edited config)
logs others, so the comparison can fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..helpers import Api
from .conftest import server_running_training, write_config

STEPS = 5


@pytest.fixture
def hyperpod_config(
    hyperpod_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    return server_running_training(hyperpod_config, monkeypatch)


async def losses(api: Api, job_id: str) -> list[tuple[int, float]]:
    """The job's own MLflow run (found by its job id tag): (step, loss) in step order."""
    reply = await api.get(f"jobs/{job_id}/metrics")
    assert reply.status == 200, reply.body
    assert reply.body["run"] is not None, reply.body.get("message")
    return [(p["step"], p["value"]) for p in reply.body["metrics"]["loss"]]


async def train(api: Api, job: dict[str, Any]) -> tuple[list[tuple[int, float]], str]:
    done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"}, timeout=240)
    log = (await api.get(f"jobs/{job['id']}/logs", rank=0, tail=200)).body["text"]
    assert done["state"] == "SUCCEEDED", log
    return await losses(api, job["id"]), log


async def test_rerun_reproduces_the_loss_curve_bit_for_bit(
    api: Api, partition: Path, tiny_model: Path, dataset_file: Path
) -> None:
    project = partition / "proj"
    config = write_config(
        project,
        model_id=str(tiny_model),
        dataset=str(dataset_file),
        seed=1234,
        lora_dropout=0.1,  # dropout draws from the seeded stream: it must replay too
        output_dir="out/${HYPERPOD_JOB_ID}",  # each job its own checkpoints and adapter
    )
    first = await api.submit(
        {
            "name": "ft",
            "template": "qlora-finetune",
            "params": {
                "config": "proj/args-fine-tuning.yaml",
                "max_steps": STEPS,
                "save_steps": 0,
                "procs_per_node": 1,
            },
        }
    )
    curve, log = await train(api, first)
    assert [step for step, _ in curve] == list(range(1, STEPS + 1)), log
    assert len({value for _, value in curve}) == STEPS  # it trained: every step its own loss
    assert (project / "out" / first["id"] / "adapter").is_dir()

    # The user edits the config after the run; the exact rerun still runs the submit's copy.
    edited = yaml.safe_load(config.read_text())
    edited["learning_rate"] = 5e-2
    config.write_text(yaml.safe_dump(edited, sort_keys=False))

    exact = await api.post(f"jobs/{first['id']}/rerun", {})
    assert exact.status == 201, exact.body
    rerun_curve, log = await train(api, exact.body)
    assert (project / "out" / exact.body["id"] / "adapter").is_dir()  # its own outputs
    assert rerun_curve == curve, log  # the floats themselves, not approximately

    changed = await api.post(f"jobs/{first['id']}/rerun", {"with_changes": True})
    assert changed.status == 201, changed.body
    changed_curve, log = await train(api, changed.body)
    assert [step for step, _ in changed_curve] == list(range(1, STEPS + 1)), log
    # Step 1's loss comes before any update; from step 2 on the learning rate shows.
    assert changed_curve[0] == curve[0]
    assert all(a != b for (_, a), (_, b) in zip(changed_curve[1:], curve[1:], strict=True))


async def test_a_rerun_into_the_same_output_dir_trains_again_and_keeps_the_first_run(
    api: Api, partition: Path, tiny_model: Path, dataset_file: Path
) -> None:
    # `resume: auto` resumes an unfinished checkpoint (a restart, a resubmit after a failure);
    # another job's finished run in the same output_dir is set aside, not resumed: the rerun
    # trains every step again, to the same losses.
    write_config(
        partition / "shared", model_id=str(tiny_model), dataset=str(dataset_file), seed=1234
    )
    params = {"config": "shared/args-fine-tuning.yaml", "max_steps": 2, "procs_per_node": 1}
    first = await api.submit({"name": "ft", "template": "qlora-finetune", "params": params})
    curve, _ = await train(api, first)
    assert [step for step, _ in curve] == [1, 2]
    checkpoints = [p for p in (partition / "shared").rglob("checkpoint-*") if p.is_dir()]
    assert checkpoints, "the first run saved no checkpoint to set aside"

    again = await api.post(f"jobs/{first['id']}/rerun", {})
    assert again.status == 201, again.body
    rerun_curve, log = await train(api, again.body)
    assert rerun_curve == curve, log
    assert f"job {first['id']}'s finished run is kept in" in log
    kept = [p for p in (partition / "shared").rglob(f"earlier-runs/{first['id']}/checkpoint-*")]
    assert sorted(p.name for p in kept) == sorted(p.name for p in checkpoints)


def test_only_another_jobs_finished_run_is_set_aside(tmp_path: Path) -> None:
    from jupyter_hyperpod.training.checkpoint import (
        STATE_FILE,
        another_jobs_finished_run,
        checkpoint_dir,
        list_checkpoints,
        set_aside,
    )

    def saved(step: int, job: str) -> Path:
        path = checkpoint_dir(tmp_path, step)
        path.mkdir()
        (path / STATE_FILE).write_text(json.dumps({"step": step, "job_id": job}))
        return path

    unfinished, finished = saved(2, "ft-1"), saved(4, "ft-1")
    assert another_jobs_finished_run(finished, 4, "ft-2") == "ft-1"  # a rerun: train again
    assert another_jobs_finished_run(finished, 4, "ft-1") is None  # its own restart
    assert another_jobs_finished_run(unfinished, 4, "ft-2") is None  # a resubmit: resume
    assert another_jobs_finished_run(finished, 4, "") is None  # not a job: as before
    kept = set_aside(tmp_path, "ft-1")
    assert list_checkpoints(tmp_path) == []
    assert sorted(p.name for p in kept.iterdir()) == [unfinished.name, finished.name]
