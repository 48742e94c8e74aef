"""Progress and ETA from what jobs print: the real writers (our training loop, tqdm, Hugging
Face's ProgressCallback) produce the text, the one parser reads it, and a running job carries it."""

from __future__ import annotations

import asyncio
import contextlib
import io
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from jupyter_hyperpod.progress import clock_seconds, progress_of_log, visible_lines

from .helpers import Api


def test_our_training_loop_lines() -> None:
    from jupyter_hyperpod.training.progress import Progress

    progress = Progress(total=50, initial=0, enabled=False)
    lines = [
        progress.update(step, loss=2.0 / step, lr=2e-4, tokens_per_second=1234.0)
        for step in range(1, 13)
    ]
    found = progress_of_log("\n".join(lines) + "\n", started=100.0, now=124.0)
    assert found is not None
    assert (found.step, found.total, found.source) == (12, 50, "training")
    assert found.loss == pytest.approx(2.0 / 12, abs=1e-4)
    assert found.elapsed_seconds == 24.0 and found.eta_seconds is not None
    assert found.fraction == pytest.approx(12 / 50)


def test_a_tqdm_bar_redrawn_in_place() -> None:
    from tqdm import tqdm

    out = io.StringIO()
    bar = tqdm(total=100, file=out, mininterval=0, ascii=False, desc="train")
    for _ in range(37):
        bar.update(1)
    bar.set_postfix_str("loss=0.8123", refresh=True)
    text = out.getvalue()  # one line of \r redraws, as a log file holds it
    assert "\n" not in text.strip() and text.count("\r") > 10
    found = progress_of_log(text)
    assert found is not None
    assert (found.step, found.total, found.source) == (37, 100, "tqdm")
    assert found.loss == pytest.approx(0.8123)
    assert found.eta_seconds is not None
    bar.close()


def test_the_trainer_progress_callback() -> None:
    callbacks = pytest.importorskip("transformers.trainer_callback")
    out = io.StringIO()
    state = SimpleNamespace(is_world_process_zero=True, max_steps=40, global_step=0)
    with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):
        callback = callbacks.ProgressCallback()
        callback.on_train_begin(None, state, None)
        for step in range(1, 11):
            state.global_step = step
            callback.on_step_end(None, state, None)
            if step % 5 == 0:
                callback.on_log(
                    None,
                    state,
                    None,
                    logs={"loss": 1.5 / step, "learning_rate": 2e-5, "epoch": step / 40},
                )
    found = progress_of_log(out.getvalue())
    assert found is not None
    assert (found.step, found.total) == (10, 40)
    assert found.loss == pytest.approx(0.15, rel=1e-3)


def test_plain_step_lines_and_nothing_to_tell() -> None:
    text = (
        "\x1b[1mdemo\x1b[0m\n\r\x1b[Kstep 03/16 loss=\x1b[33m0.6667\x1b[0m\n\rprogress [###.....]"
    )
    found = progress_of_log(text, started=10.0, now=16.0)
    assert found is not None and (found.step, found.total, found.loss) == (3, 16, 0.6667)
    assert found.eta_seconds == pytest.approx(6.0 / 3 * 13)
    assert progress_of_log("hello\nworld\n") is None
    assert visible_lines("a\rb\r\n\x1b[31mc\x1b[0m\n") == ["b", "c"]
    assert clock_seconds("1:02:03") == 3723 and clock_seconds("?") is None


STEPS = textwrap.dedent(
    """
    import sys, time
    total = int(sys.argv[1])
    for step in range(1, total + 1):
        print(f"step {step}/{total} | loss {1.0 / step:.4f} | lr 1.00e-04 | 10 tok/s | eta 0:00:05",
              flush=True)
        time.sleep(0.05)
    time.sleep(30)
    """
)


async def test_a_running_job_carries_its_progress(api: Api, partition: Path) -> None:
    (partition / "steps.py").write_text(STEPS)
    job = await api.submit(
        {"name": "prog", "template": "script", "params": {"script": "steps.py", "args": "8"}}
    )
    deadline = time.monotonic() + 30
    progress = None
    while time.monotonic() < deadline:
        reply = await api.get(f"jobs/{job['id']}")
        progress = reply.body.get("progress")
        if progress and progress["step"] == 8:
            break
        await asyncio.sleep(0.2)
    assert progress is not None and progress["step"] == 8 and progress["total"] == 8
    assert progress["loss"] == pytest.approx(0.125) and progress["source"] == "training"
    listed = await api.get("jobs")
    assert [j["progress"]["step"] for j in listed.body["jobs"] if j["id"] == job["id"]] == [8]
    cancelled = await api.delete(f"jobs/{job['id']}")
    assert cancelled.body["state"] == "CANCELLED" and cancelled.body.get("progress") is None


def test_progress_from_an_mlflow_run(tmp_path: Path) -> None:
    tracking = pytest.importorskip("mlflow.tracking")
    from jupyter_hyperpod.progress import progress_from_mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert progress_from_mlflow(uri, "nothing-yet") is None  # no store: never created here
    # The client, not mlflow's fluent API: no process-wide state left for the next tests.
    client = tracking.MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("progress")
    ours = client.create_run(experiment, tags={"hyperpod.job_id": "ft-abc123"})
    client.log_param(ours.info.run_id, "run.total_steps", 20)
    for step in range(1, 6):
        client.log_metric(ours.info.run_id, "loss", 1.0 / step, step=step)
    trainer = client.create_run(experiment, tags={"hyperpod.job_id": "hf-def456"})
    client.log_param(trainer.info.run_id, "max_steps", -1)  # the Trainer by epochs: no total
    client.log_metric(trainer.info.run_id, "loss", 0.5, step=3)
    found = progress_from_mlflow(uri, "ft-abc123", started=time.time() - 10)
    assert found is not None and found.source == "mlflow"
    assert (found.step, found.total) == (5, 20) and found.loss == pytest.approx(0.2)
    assert found.eta_seconds is not None and found.eta_seconds > 0
    assert progress_from_mlflow(uri, "hf-def456") is None
    assert progress_from_mlflow(uri, "other-000000") is None


MLFLOW_ONLY = textwrap.dedent(
    """
    import os, time
    import mlflow
    mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
    mlflow.set_experiment("quiet")
    with mlflow.start_run(tags={"hyperpod.job_id": os.environ["HYPERPOD_JOB_ID"]}):
        mlflow.log_params({"run.total_steps": 10})
        for step in range(1, 5):
            mlflow.log_metric("loss", 2.0 / step, step=step)
        print("logged", flush=True)  # no step lines: the log tells nothing
        time.sleep(60)
    """
)


@pytest.mark.slow
async def test_a_job_that_prints_no_steps_gets_its_progress_from_mlflow(
    api: Api, partition: Path
) -> None:
    pytest.importorskip("mlflow")
    (partition / "quiet.py").write_text(MLFLOW_ONLY)
    job = await api.submit(
        {"name": "quiet", "template": "script", "params": {"script": "quiet.py"}}
    )
    deadline = time.monotonic() + 90
    progress = None
    while time.monotonic() < deadline:
        reply = await api.get(f"jobs/{job['id']}")
        if reply.body["state"] not in ("PENDING", "RUNNING"):
            log = await api.get(f"jobs/{job['id']}/logs", tail=30)
            raise AssertionError(
                f"{reply.body['state']} {reply.body['exit_code']} {reply.body['state_reason']}: {log.body['text']}"
            )
        progress = reply.body.get("progress")
        if progress and progress["step"] == 4:
            break
        await asyncio.sleep(0.5)
    await api.delete(f"jobs/{job['id']}")
    assert progress is not None, "no progress from the MLflow run"
    assert progress["source"] == "mlflow" and (progress["step"], progress["total"]) == (4, 10)
    assert progress["loss"] == pytest.approx(0.5)
