"""What a sweep's members share when they start together: the prepared data of one config and
the partition's sqlite MLflow store. The first job prepares or makes it, the others wait for it
and use it; an interrupted first attempt leaves nothing half-made behind (CI of 91c46b8: two
members of a 2x2 sweep read `data/train` while the first wrote it, and the store was left
half-migrated, "table _alembic_tmp_tags already exists", for every job after)."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_hyperpod.training.config import ConfigError, load_config
from jupyter_hyperpod.training.dataprep import (
    DATA_FILE,
    is_prepared,
    prepare_lock,
    prepare_missing,
    read_split,
    write_split,
)
from jupyter_hyperpod.training.filelock import exclusive
from jupyter_hyperpod.training.mlflow_tracking import check_tracking_uri

mlflow = pytest.importorskip("mlflow")


def config_for(tmp_path: Path, dataset: Path) -> Any:
    return load_config(
        None,
        {
            "dataset": str(dataset),
            "train_dataset_path": str(tmp_path / "data/train"),
            "test_dataset_path": str(tmp_path / "data/test"),
        },
    )


def test_a_split_being_written_is_not_prepared_data(tmp_path: Path, dataset_file: Path) -> None:
    config = config_for(tmp_path, dataset_file)
    train = Path(config.train_dataset_path)
    train.mkdir(parents=True)
    (train / f".{DATA_FILE}.4242.0a1b2c3d.tmp").write_text('{"prompt": "half a fi')
    assert not is_prepared(config)
    write_split(train, [{"prompt": "p", "completion": "c"}])
    assert is_prepared(config)
    assert sorted(entry.name for entry in train.iterdir()) == [
        f".{DATA_FILE}.4242.0a1b2c3d.tmp",  # (the other writer's, still writing)
        DATA_FILE,
    ]


def test_a_job_waits_for_the_data_another_is_preparing(tmp_path: Path, dataset_file: Path) -> None:
    config = config_for(tmp_path, dataset_file)
    theirs = [{"prompt": "theirs", "completion": "kept"}] * 3
    prepared: list[bool] = []
    with exclusive(prepare_lock(config)):  # another job is preparing
        waiting = threading.Thread(target=lambda: prepared.append(prepare_missing(config)))
        waiting.start()
        time.sleep(0.5)
        assert waiting.is_alive(), "it did not wait for the job holding the lock"
        write_split(config.train_dataset_path, theirs)
        write_split(config.test_dataset_path, theirs[:1])
    waiting.join(30)
    assert prepared == [False]  # it found theirs: nothing written again
    assert read_split(config.train_dataset_path) == theirs
    assert prepare_missing(config) is False
    empty = config_for(tmp_path / "fresh", dataset_file)
    assert prepare_missing(empty) is True
    assert len(read_split(empty.train_dataset_path)) + len(read_split(empty.test_dataset_path)) == (
        160
    )


def _check(uri: str, results: Any) -> None:
    import mlflow

    try:
        check_tracking_uri(mlflow, uri)
        results.put("ok")
    except Exception as error:  # reported to the test
        results.put(f"{type(error).__name__}: {error}")


def test_jobs_starting_together_share_one_whole_store(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    jobs = [context.Process(target=_check, args=(uri, results)) for _ in range(3)]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(180)
    assert [results.get(timeout=5) for _ in jobs] == ["ok"] * 3
    assert sorted(os.listdir(tmp_path)) == ["mlflow.db", "mlflow.db.init-lock"]
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        (revision,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    from mlflow.store.db.utils import _get_latest_schema_revision

    assert revision == _get_latest_schema_revision()


def test_an_interrupted_first_use_leaves_no_store_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow.store.db.utils as db_utils

    store = tmp_path / "mlflow.db"
    uri = f"sqlite:///{store}"
    upgrade = db_utils._upgrade_db

    def interrupted(engine: Any) -> None:
        raise RuntimeError("killed in the middle of the migration")

    monkeypatch.setattr(db_utils, "_upgrade_db", interrupted)
    with pytest.raises(ConfigError, match="killed in the middle of the migration"):
        check_tracking_uri(mlflow, uri)
    assert sorted(os.listdir(tmp_path)) == ["mlflow.db.init-lock"]  # nothing half-made
    monkeypatch.setattr(db_utils, "_upgrade_db", upgrade)
    check_tracking_uri(mlflow, uri)
    assert [e.name for e in mlflow.MlflowClient(uri).search_experiments()] == ["Default"]


def test_a_half_migrated_store_says_how_to_recover(tmp_path: Path) -> None:
    store = tmp_path / "mlflow.db"
    uri = f"sqlite:///{store}"
    check_tracking_uri(mlflow, uri)
    with sqlite3.connect(store) as db:  # what an interrupted batch migration leaves
        db.execute("CREATE TABLE _alembic_tmp_tags (key VARCHAR(250))")
    with pytest.raises(ConfigError) as refused:
        check_tracking_uri(mlflow, uri)
    assert "half-migrated" in str(refused.value)
    assert "_alembic_tmp_tags" in str(refused.value)
    assert f"mv {store} {store}.broken" in str(refused.value)
