"""A job's MLflow metrics for the panel: the run tagged with the job id, with every metric history.

mlflow is imported only when asked (the extension stays light without the `mlflow` extra). Works
with sqlite:///, http(s):// and SageMaker MLflow ARN tracking URIs (the last needs the
`sagemaker-mlflow` plugin installed on the server).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from contextlib import closing
from typing import Any

from .core.models import JobMetrics, MetricPoint, MlflowRunInfo

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


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str | None:
    """The MLflow UI page of a run, when the tracking server has one we can link to."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    return None


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
    return JobMetrics(run=info, metrics=metrics)
