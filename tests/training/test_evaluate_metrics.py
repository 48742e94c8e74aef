"""An evaluate job's scores as the panel gets them: typed (fine-tuned vs base per ROUGE variant,
with the delta) from a real MLflow store, its run's link on the server's MLflow UI address, and
generation that says how far it is (the progress parser reads its bar)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.core.models import JobMetrics
from jupyter_hyperpod.metrics import EVAL_JOB_ID_TAG, read_job_metrics, with_ui_url
from jupyter_hyperpod.progress import progress_of_log

SCORES = {
    "finetuned": {"rouge1": 0.41, "rouge2": 0.18, "rougeL": 0.33, "rougeLsum": 0.39},
    "base": {"rouge1": 0.12, "rouge2": 0.03, "rougeL": 0.10, "rougeLsum": 0.11},
}


def _logged_run(store: Path, job_id: str, metrics: dict[str, float]) -> tuple[str, str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    experiment = client.create_experiment("qlora")
    run = client.create_run(experiment, tags={EVAL_JOB_ID_TAG: job_id})
    for step in range(3):  # the training job's curve, in the same run
        client.log_metric(run.info.run_id, "loss", 2.0 - step / 2, step=step)
    for key, value in metrics.items():
        client.log_metric(run.info.run_id, key, value, step=0)
    client.set_terminated(run.info.run_id)
    return experiment, run.info.run_id


def test_an_evaluation_is_typed_from_its_mlflow_metrics(tmp_path: Path) -> None:
    logged: dict[str, float] = {
        f"eval_{name}_{model}": value
        for model, scores in SCORES.items()
        for name, value in scores.items()
    }
    logged.update(eval_samples=16.0, eval_max_new_tokens=96.0)
    store = tmp_path / "mlflow.db"
    _logged_run(store, "eval-1", logged)

    metrics = read_job_metrics(f"sqlite:///{store}", "eval-1")
    evaluation = metrics.evaluation
    assert evaluation is not None, metrics.message
    assert [row.name for row in evaluation.rouge] == ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    for row in evaluation.rouge:
        assert row.finetuned == pytest.approx(SCORES["finetuned"][row.name])
        assert row.base == pytest.approx(SCORES["base"][row.name])
        assert row.delta == pytest.approx(SCORES["finetuned"][row.name] - SCORES["base"][row.name])
    assert evaluation.samples == 16 and evaluation.max_new_tokens == 96
    assert "loss" not in evaluation.metric_names and len(evaluation.metric_names) == 10
    assert set(evaluation.metric_names) == set(logged)
    # The REST document's shape: what the panel's generated types describe.
    body = metrics.model_dump(mode="json")
    assert body["evaluation"]["rouge"][0] == {
        "name": "rouge1",
        "base": pytest.approx(0.12),
        "finetuned": pytest.approx(0.41),
        "delta": pytest.approx(0.29),
    }


def test_without_the_base_the_delta_is_null_and_a_training_run_has_no_evaluation(
    tmp_path: Path,
) -> None:
    store = tmp_path / "mlflow.db"
    _logged_run(store, "eval-2", {"eval_rougeL_finetuned": 0.3})
    only = read_job_metrics(f"sqlite:///{store}", "eval-2").evaluation
    assert only is not None
    assert [(r.name, r.base, r.delta) for r in only.rouge] == [("rougeL", None, None)]
    assert only.samples is None

    _logged_run(tmp_path / "other.db", "train-1", {})
    assert read_job_metrics(f"sqlite:///{tmp_path / 'other.db'}", "train-1").evaluation is None


def test_the_run_links_to_the_server_s_mlflow_ui(tmp_path: Path) -> None:
    store = tmp_path / "mlflow.db"
    experiment, run_id = _logged_run(store, "eval-3", {"eval_rouge1_finetuned": 0.2})
    uri = f"sqlite:///{store}"
    metrics = read_job_metrics(uri, "eval-3")
    assert metrics.run is not None and metrics.run.url is None  # sqlite: no UI of its own
    linked = with_ui_url(metrics, uri, "http://mlflow.example:5000/")
    assert linked.run is not None
    assert linked.run.url == f"http://mlflow.example:5000/#/experiments/{experiment}/runs/{run_id}"
    assert with_ui_url(metrics, uri, "") is metrics
    assert with_ui_url(JobMetrics(message="none"), uri, "http://m").run is None


def test_generation_says_how_far_it_is(
    tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each batch moves the bar; the log's bar is what the job's progress is parsed from."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from jupyter_hyperpod.training.evaluate import generate, generation_bar

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    model: Any = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    prompts = ["a b c", "d e", "f g h i"]
    bar = generation_bar(len(prompts), passes=2)
    kwargs: dict[str, Any] = {"max_new_tokens": 2, "device": torch.device("cpu")}
    generate(model, tokenizer, prompts, batch_size=1, done=bar.update, **kwargs)
    halfway = progress_of_log(capsys.readouterr().out, started=None)
    assert halfway is not None and (halfway.step, halfway.total) == (3, 6)
    assert halfway.source == "tqdm"
    bar.set_description("generating (base)")
    generate(model, tokenizer, prompts, batch_size=2, done=bar.update, **kwargs)
    bar.close()
    log = capsys.readouterr().out
    assert "generating (base)" in log and "6/6" in log
    done = progress_of_log(log, started=None)
    assert done is not None and (done.step, done.total, done.fraction) == (6, 6, 1.0)
