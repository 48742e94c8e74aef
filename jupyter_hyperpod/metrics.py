"""A job's MLflow metrics for the panel: the run tagged with the job id, with every metric history.

mlflow is imported only when asked (the extension stays light without the `mlflow` extra). Works
with sqlite:///, http(s):// and SageMaker MLflow ARN tracking URIs (the last needs the
`sagemaker-mlflow` plugin installed on the server).
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
from contextlib import closing
from typing import Any

from .core.models import (
    EvaluationMetrics,
    JobMetrics,
    MetricPoint,
    MlflowRunInfo,
    RougeComparison,
)

log = logging.getLogger(__name__)

JOB_ID_TAG = "hyperpod.job_id"
EVAL_JOB_ID_TAG = "hyperpod.eval_job_id"
MAX_POINTS_PER_METRIC = 5000


def _find_run(client: Any, job_id: str) -> Any | None:
    experiments = [e.experiment_id for e in client.search_experiments(max_results=1000)]
    if not experiments:
        return None
    safe = job_id.replace("'", "")
    for tag in (JOB_ID_TAG, EVAL_JOB_ID_TAG):
        runs = client.search_runs(
            experiments,
            filter_string=f"tags.`{tag}` = '{safe}'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if runs:
            return runs[0]
    return None


def run_url(
    tracking_uri: str, experiment_id: str, run_id: str, ui_url: str | None = None
) -> str | None:
    """The MLflow UI page of a run: on `ui_url` (the server's mlflow_ui_url) when set, else on
    an http(s) tracking server (its own UI); None when no UI address is known (sqlite, an ARN)."""
    base = ui_url or (tracking_uri if tracking_uri.startswith(("http://", "https://")) else "")
    if not base:
        return None
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def with_ui_url(metrics: JobMetrics, tracking_uri: str | None, ui_url: str) -> JobMetrics:
    """The metrics with their run's link on the server's MLflow UI address (mlflow_ui_url)."""
    run = metrics.run
    if run is None or not ui_url:
        return metrics
    url = run_url(tracking_uri or "", run.experiment_id, run.run_id, ui_url)
    return metrics.model_copy(update={"run": run.model_copy(update={"url": url})})


_EVAL_ROUGE = re.compile(r"^eval_(?P<name>rouge[0-9A-Za-z]+)_(?P<model>finetuned|base)$")
"""What training/evaluate.py logs: eval_<ROUGE variant>_<finetuned|base>."""


def _rouge_order(name: str) -> tuple[int, int, str]:
    digits = name.removeprefix("rouge")
    return (0, int(digits), "") if digits.isdigit() else (1, 0, digits)


def evaluation_of(metrics: dict[str, list[MetricPoint]]) -> EvaluationMetrics | None:
    """The evaluation a run holds (its latest scores), typed; None when it holds none."""
    scores: dict[str, dict[str, float]] = {}
    used: list[str] = []
    for key, points in metrics.items():
        match = _EVAL_ROUGE.match(key)
        if match and points:
            scores.setdefault(match["name"], {})[match["model"]] = points[-1].value
            used.append(key)
    if not scores:
        return None
    rows = []
    for name in sorted(scores, key=_rouge_order):
        base, finetuned = scores[name].get("base"), scores[name].get("finetuned")
        delta = finetuned - base if base is not None and finetuned is not None else None
        rows.append(RougeComparison(name=name, base=base, finetuned=finetuned, delta=delta))

    def single(key: str) -> int | None:
        points = metrics.get(key)
        if not points:
            return None
        used.append(key)
        return int(points[-1].value)

    return EvaluationMetrics(
        rouge=rows,
        samples=single("eval_samples"),
        max_new_tokens=single("eval_max_new_tokens"),
        metric_names=sorted(used),
    )


def _downsample(points: list[MetricPoint], limit: int) -> list[MetricPoint]:
    if len(points) <= limit:
        return points
    stride = len(points) / limit
    picked = [points[int(i * stride)] for i in range(limit - 1)]
    return [*picked, points[-1]]


def sqlite_store_ready(tracking_uri: str) -> bool:
    """Whether a sqlite tracking store exists with its schema complete.

    MLflow's client creates and migrates a sqlite store it opens: reading a store the job is still
    creating would race its migration and corrupt it for good. A reader must never write, so a
    store that is missing or half-made answers "no run yet" instead.
    """
    path = tracking_uri.removeprefix("sqlite:///")
    if not os.path.isfile(path):
        return False
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
            tables = {
                row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if "alembic_version" not in tables or any(t.startswith("_alembic_tmp") for t in tables):
                return False
            return db.execute("SELECT COUNT(*) FROM alembic_version").fetchone()[0] > 0
    except sqlite3.Error:
        return False


def read_job_metrics(tracking_uri: str | None, job_id: str) -> JobMetrics:
    """All metric histories of the job's run; an empty result with a `message` saying why not."""
    if not tracking_uri:
        return JobMetrics(message="no MLflow tracking URI is configured")
    if tracking_uri.startswith("sqlite:///") and not sqlite_store_ready(tracking_uri):
        return JobMetrics(
            message="no MLflow run for this job yet (its tracking store is not created yet)"
        )
    try:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError:
        return JobMetrics(message="mlflow is not installed on the server (pip install mlflow)")
    try:
        client = MlflowClient(tracking_uri=tracking_uri)
        run = _find_run(client, job_id)
        if run is None:
            return JobMetrics(message=f"no MLflow run tagged {JOB_ID_TAG}={job_id} yet")
        metrics: dict[str, list[MetricPoint]] = {}
        for key in sorted(run.data.metrics):
            history = client.get_metric_history(run.info.run_id, key)
            points = sorted(
                (
                    MetricPoint(step=m.step, value=m.value, timestamp=m.timestamp / 1000.0)
                    for m in history
                ),
                key=lambda p: (p.step, p.timestamp),
            )
            metrics[key] = _downsample(points, MAX_POINTS_PER_METRIC)
    except MlflowException as error:
        log.warning("MLflow metrics of job %s: %s", job_id, error)
        return JobMetrics(message=f"MLflow error: {error.message}")
    except Exception as error:  # unreachable server, bad ARN credentials, corrupt store
        log.warning("MLflow metrics of job %s: %s", job_id, error)
        return JobMetrics(message=f"cannot read MLflow at {tracking_uri}: {error}")
    info = MlflowRunInfo(
        run_id=run.info.run_id,
        experiment_id=run.info.experiment_id,
        status=run.info.status,
        url=run_url(tracking_uri, run.info.experiment_id, run.info.run_id),
    )
    return JobMetrics(run=info, metrics=metrics, evaluation=evaluation_of(metrics))
