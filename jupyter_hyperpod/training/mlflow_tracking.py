"""MLflow tracking for a job: one run per job (found again by its job id tag on auto-resume).

The tracking URI is the config's `mlflow_uri` (the seed's key: a server URL or a SageMaker MLflow
ARN), else $MLFLOW_TRACKING_URI (set on every job when the server has one), else a sqlite file in
the output directory. Only rank 0 talks to MLflow.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import EVAL_JOB_ID_TAG, JOB_ID_TAG
from .config import ConfigError, TrainingConfig
from .filelock import exclusive

log = logging.getLogger("jupyter_hyperpod.training")

RUN_FILE = "mlflow_run.json"


def resolve_tracking_uri(config: TrainingConfig) -> str:
    if config.mlflow_uri:
        return config.mlflow_uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{Path(config.output_dir).resolve() / 'mlflow.db'}"


def _sqlite_path(uri: str) -> Path | None:
    """The file of a sqlite tracking URI (None for any other store)."""
    return Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:///") else None


def _prepare_uri(uri: str) -> None:
    path = _sqlite_path(uri)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def _sqlite_first_use(mlflow: Any, uri: str) -> Iterator[None]:
    """One process at a time makes (or migrates) a sqlite store, whole
    (`_sqlite_store_made_whole`): jobs that start together (a sweep's members, #24) would
    otherwise race on MLflow's schema migration ("table ... already exists", "Online migration
    expected to match one row")."""
    path = _sqlite_path(uri)
    if path is None:
        yield
        return
    with exclusive(Path(f"{path}.init-lock")):
        _sqlite_store_made_whole(mlflow, path)
        yield


def _sqlite_store_made_whole(mlflow: Any, path: Path) -> None:
    """Make a new sqlite store whole before anyone can open it; refuse a half-made one.

    MLflow creates a store it opens and migrates it in place, one statement at a time (SQLite
    commits each DDL statement on its own). One interrupted there (the process killed, a
    statement refused) leaves a store no later job can open ("table _alembic_tmp_tags already
    exists"), and every job of the partition then fails. So MLflow makes a new store under a
    name of this process's own beside it, and the finished file is linked into place (a store
    that appeared meanwhile is kept)."""
    if path.exists():
        half_made = _alembic_leftovers(path)
        if half_made:
            raise ConfigError(
                f"mlflow_uri: the MLflow store {path} was left half-migrated by an interrupted "
                f"schema upgrade (table {half_made[0]}); MLflow cannot open it again. Keep it "
                f"aside (mv {path} {path}.broken) and run the job again: a new store is made "
                "(the runs stay in the copy, readable with sqlite3)"
            )
        return
    scratch = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.new")
    uri = f"sqlite:///{scratch}"
    try:
        mlflow.MlflowClient(uri).search_experiments(max_results=1)
        _close_engine(uri)
        try:
            os.link(scratch, path)  # never over a store that appeared meanwhile
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(scratch, path)
    finally:
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{scratch}{suffix}").unlink(missing_ok=True)


def _alembic_leftovers(path: Path) -> list[str]:
    """Tables an interrupted migration left behind (alembic's batch operations on SQLite copy a
    table to `_alembic_tmp_<name>`, drop the original, then rename the copy)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    except sqlite3.Error:
        return []
    return sorted(row[0] for row in rows if row[0].startswith("_alembic_tmp_"))


def _close_engine(uri: str) -> None:
    """Close MLflow's pooled connections to `uri` (its engines are kept per URI) before the
    file is moved."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    except ImportError:
        return
    engine = getattr(SqlAlchemyStore, "_engine_map", {}).pop(uri, None)
    if engine is not None:
        engine.dispose()


# MLflow's REST client retries a refused connection 7 times with exponential backoff (minutes):
# for the first request we want an answer in seconds.
_FAST_FAIL = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}


# The resource types sagemaker-mlflow knows (`SageMakerMLflowHostMetadataProvider._get_endpoint`).
_SAGEMAKER_ARN = re.compile(
    r"arn:aws(-[a-z-]+)?:sagemaker:[a-z0-9-]+:\d{12}:(mlflow-tracking-server|mlflow-app)/[\w.-]+"
)


def check_tracking_uri(mlflow: Any, uri: str) -> None:
    """One cheap request to the tracking store; ConfigError with the cause if it fails.

    A SageMaker MLflow ARN goes through the `sagemaker-mlflow` plugin (its `arn` tracking store
    signs each request with SigV4 and sends it to the region's endpoint, or to
    $SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT: `sagemaker_mlflow/mlflow_sagemaker_helpers.py`).
    """
    if uri.startswith("arn:"):
        import importlib.util

        if not _SAGEMAKER_ARN.fullmatch(uri):
            raise ConfigError(
                f"mlflow_uri: {uri} is not a SageMaker MLflow ARN (arn:aws:sagemaker:<region>:"
                "<account>:mlflow-tracking-server/<name>, or mlflow-app/<id>)"
            )

        if importlib.util.find_spec("sagemaker_mlflow") is None:
            raise ConfigError(
                f"mlflow_uri {uri} is a SageMaker MLflow ARN, which needs the sagemaker-mlflow "
                "plugin: pip install sagemaker-mlflow (part of jupyter-hyperpod[training])"
            )
    saved = {key: os.environ.get(key) for key in _FAST_FAIL}
    os.environ.update(_FAST_FAIL)
    try:
        with _sqlite_first_use(mlflow, uri):
            mlflow.MlflowClient(uri).search_experiments(max_results=1)
    except ConfigError:
        raise
    except Exception as error:
        where = uri
        endpoint = os.environ.get("SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT")
        if uri.startswith("arn:") and endpoint:
            where += f" (endpoint {endpoint})"
        message = str(error).strip().splitlines()[0][:400] if str(error).strip() else ""
        raise ConfigError(
            f"mlflow_uri: cannot use the MLflow tracking server at {where}: "
            f"{type(error).__name__}: {message}"
        ) from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def find_run_by_tag(client: Any, tag: str, value: str) -> Any | None:
    """The newest run tagged `tag=value` in any experiment (None when there is none)."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return None
    runs = client.search_runs(
        experiments,
        filter_string=f"tags.`{tag}` = '{value}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return runs[0] if runs else None


class Tracker:
    """Wraps the mlflow module; inactive (every call a no-op) on ranks other than 0."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.uri: str | None = None
        self._mlflow: Any = None
        # mlflow.set_tracking_uri also sets $MLFLOW_TRACKING_URI: put it back at the end, or a
        # second run in the same process (a notebook) would log into the first one's store.
        self._saved_env = os.environ.get("MLFLOW_TRACKING_URI")

    @classmethod
    def for_training(cls, config: TrainingConfig, *, active: bool, resuming: bool) -> Tracker:
        tracker = cls(active)
        if not active:
            return tracker
        try:
            import mlflow
        except ImportError:
            log.warning("mlflow is not installed: no experiment tracking")
            tracker.active = False
            return tracker
        tracker._mlflow = mlflow
        tracker.uri = resolve_tracking_uri(config)
        _prepare_uri(tracker.uri)
        # The plugin's SigV4 auth and headers read the ARN from the global tracking URI.
        mlflow.set_tracking_uri(tracker.uri)
        try:
            check_tracking_uri(mlflow, tracker.uri)
        except ConfigError:
            tracker._restore_env()
            raise
        client = mlflow.MlflowClient(tracker.uri)
        job_id = os.environ.get("HYPERPOD_JOB_ID")
        existing = None
        run_file = Path(config.output_dir) / RUN_FILE
        if job_id:
            existing = find_run_by_tag(client, JOB_ID_TAG, job_id)
        elif resuming and run_file.is_file():
            saved = json.loads(run_file.read_text())
            if saved.get("tracking_uri") == tracker.uri:
                existing = client.get_run(saved["run_id"])
        if existing is not None:
            log.info("MLflow: continuing run %s (%s)", existing.info.run_id, tracker.uri)
            run = mlflow.start_run(
                run_id=existing.info.run_id, log_system_metrics=config.log_system_metrics
            )
        else:
            experiment = mlflow.set_experiment(config.mlflow_experiment_name)
            tags = {JOB_ID_TAG: job_id} if job_id else {}
            if os.environ.get("HYPERPOD_JOB_NAME"):
                tags["hyperpod.job_name"] = os.environ["HYPERPOD_JOB_NAME"]
            run = mlflow.start_run(
                experiment_id=experiment.experiment_id,
                tags=tags,
                run_name=os.environ.get("HYPERPOD_JOB_NAME") or None,
                log_system_metrics=config.log_system_metrics,
            )
            log.info(
                "MLflow: run %s in experiment '%s' (%s)",
                run.info.run_id,
                config.mlflow_experiment_name,
                tracker.uri,
            )
        tracker.run_id = run.info.run_id
        tracker.experiment_id = run.info.experiment_id
        run_file.parent.mkdir(parents=True, exist_ok=True)
        run_file.write_text(
            json.dumps(
                {
                    "run_id": tracker.run_id,
                    "tracking_uri": tracker.uri,
                    "experiment_id": tracker.experiment_id,
                }
            )
        )
        return tracker

    @classmethod
    def for_evaluation(cls, config: TrainingConfig) -> Tracker:
        """Log into the training run whose model is evaluated (its run file in output_dir), else
        into a new run of this job (tagged with its job id, so the panel finds it)."""
        tracker = cls(True)
        run_file = Path(config.output_dir) / RUN_FILE
        try:
            import mlflow
        except ImportError:
            log.warning("mlflow is not installed: evaluation metrics go to the JSON file only")
            tracker.active = False
            return tracker
        tracker._mlflow = mlflow
        job_id = os.environ.get("HYPERPOD_JOB_ID")
        saved = json.loads(run_file.read_text()) if run_file.is_file() else None
        tracker.uri = saved["tracking_uri"] if saved else resolve_tracking_uri(config)
        _prepare_uri(tracker.uri)
        mlflow.set_tracking_uri(tracker.uri)
        try:
            check_tracking_uri(mlflow, tracker.uri)
        except ConfigError:
            tracker._restore_env()
            raise
        if saved:
            run = mlflow.start_run(run_id=saved["run_id"])
            if job_id:
                mlflow.set_tag(EVAL_JOB_ID_TAG, job_id)
        else:
            log.info("no %s in %s: evaluation gets its own MLflow run", RUN_FILE, config.output_dir)
            experiment = mlflow.set_experiment(config.mlflow_experiment_name)
            run = mlflow.start_run(
                experiment_id=experiment.experiment_id,
                tags={JOB_ID_TAG: job_id, "hyperpod.step": "evaluate"} if job_id else {},
                run_name=os.environ.get("HYPERPOD_JOB_NAME") or None,
            )
        tracker.run_id = run.info.run_id
        tracker.experiment_id = run.info.experiment_id
        return tracker

    def log_params(self, params: dict[str, Any]) -> None:
        if not self.active:
            return
        client = self._mlflow.MlflowClient(self.uri)
        logged = client.get_run(self.run_id).data.params
        fresh = {k: str(v)[:500] for k, v in params.items() if k not in logged}
        changed = [k for k, v in params.items() if k in logged and logged[k] != str(v)[:500]]
        if changed:
            log.warning("MLflow params differ from the first attempt (kept the first): %s", changed)
        if fresh:
            self._mlflow.log_params(fresh)

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if self.active:
            self._mlflow.log_metrics(metrics, step=step, synchronous=False)

    def flush(self) -> None:
        """Wait until every metric logged so far is stored. A checkpoint calls this first: a
        run resumed from step N never logs steps <= N again, so those must not still sit in
        the async queue when the node dies."""
        if self.active:
            self._mlflow.flush_async_logging()

    def set_tags(self, tags: dict[str, str]) -> None:
        if self.active:
            self._mlflow.set_tags(tags)

    def log_artifact(self, path: Path) -> None:
        if not self.active:
            return
        try:
            self._mlflow.log_artifact(str(path))
        except Exception as error:  # artifact stores (S3...) may be unreachable from the node
            log.warning("MLflow: could not upload %s: %s", path, error)

    def end(self, status: str = "FINISHED") -> None:
        if not self.active:
            return
        self.active = False  # once: a failure path may end it again
        self._mlflow.flush_async_logging()
        self._mlflow.end_run(status=status)
        self._restore_env()

    def _restore_env(self) -> None:
        if self._saved_env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = self._saved_env
