"""Typed backend state (core/state.py): one pydantic model per backend, rows of older
versions migrated when the store is opened, undeclared keys refused, Slurm's events kept once."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jupyter_hyperpod.backends.kubernetes.state import KubernetesState
from jupyter_hyperpod.backends.local import LocalOrchestrator, LocalState
from jupyter_hyperpod.backends.slurm.backend import SlurmOrchestrator
from jupyter_hyperpod.backends.slurm.jobs import JobRecord
from jupyter_hyperpod.backends.slurm.state import SlurmState
from jupyter_hyperpod.core.backend import JobUpdate, StoredJob
from jupyter_hyperpod.core.models import JobSpec, JobState
from jupyter_hyperpod.core.registry import state_class
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings

LEGACY_SLURM = {  # what a Slurm job's data looked like before: 13 keys, events twice
    "slurm_id": "42",
    "stdout": "/fsx/shared/.hyperpod/jobs/j-1/slurm-42.out",
    "stdout_known": True,
    "job_dir": "/fsx/shared/.hyperpod/jobs/j-1",
    "job_dir_local": "/home/u/fsx/shared/.hyperpod/jobs/j-1",
    "script": "/home/u/fsx/shared/.hyperpod/jobs/j-1/job.sbatch",
    "world_size": 4,
    "procs_per_node": 2,
    "torchrun": True,
    "slurm_state": "RUNNING",
    "slurm_reason": "None",
    "nodes": "node[1-2]",
    "events": ["submitted as Slurm job 42", "Slurm: RUNNING"],
    "mlflow_uri": "sqlite:////fsx/shared/.hyperpod/mlflow.db",
}


def test_each_backend_has_its_model() -> None:
    assert state_class("local") is LocalState
    assert state_class("slurm") is SlurmState
    assert state_class("kubernetes") is KubernetesState
    assert SlurmOrchestrator.State is SlurmState and LocalOrchestrator.State is LocalState


def test_a_legacy_slurm_row_migrates_and_keeps_its_facts() -> None:
    state = SlurmState.load(LEGACY_SLURM)
    assert state.slurm_id == "42" and state.nodes == "node[1-2]" and state.torchrun
    stored = state.stored()
    assert "events" not in stored  # on the job only now
    assert {k: v for k, v in LEGACY_SLURM.items() if k != "events"} == stored
    assert SlurmState.load(stored) == state


def test_undeclared_keys_are_refused_on_update_and_dropped_on_load() -> None:
    state = LocalState.load({"job_dir": "/x", "world_size": 1})
    with pytest.raises(ValidationError):
        state.merged({"pidd": 12})
    with pytest.raises(ValidationError):
        state.merged({"pid": "not a number"})
    assert state.merged({"pid": 12}).pid == 12
    assert LocalState.load({"job_dir": "/x", "stray": 1}).stored() == {"job_dir": "/x"}


def test_a_state_is_read_by_its_fields_only() -> None:
    """No dict access kept for old code (#26 item 3): a misspelt key is an AttributeError that
    mypy sees, not a silent None."""
    state = LocalState.load({"job_dir": "/x", "uid": 1000})
    assert state.job_dir == "/x" and state.uid == 1000
    with pytest.raises(TypeError):
        state["job_dir"]  # type: ignore[index]
    assert not hasattr(state, "get")


def test_slurm_events_are_kept_once(tmp_path: Path) -> None:
    backend = SlurmOrchestrator(settings=HyperPodSettings(job_store=str(tmp_path / "j.sqlite")))
    job = StoredJob(
        id="j-1",
        spec=JobSpec(name="j", command=["train.py"], nodes=2, procs_per_node=2),
        state=JobState.PENDING,
        backend_id="42",
        created=time.time(),
        started=None,
        data=SlurmState.load(LEGACY_SLURM | {"slurm_state": "PENDING"}),
        events=["submitted as Slurm job 42"],
    )
    update = backend._update_from(job, JobRecord(slurm_id="42", slurm_state="RUNNING"))
    assert update is not None and update.events == ["submitted as Slurm job 42", "Slurm: RUNNING"]
    assert isinstance(update.data, SlurmState) and "events" not in update.data.changes()
    assert SlurmState.load(job.data).merged(update.data).slurm_state == "RUNNING"


def test_a_backend_reports_a_typed_partial_of_its_state() -> None:
    """`JobUpdate.data` is the backend's State with only what changed set: validated where the
    backend builds it, merged field by field (an explicit None clears a fact), stored as before."""
    with pytest.raises(ValidationError):
        SlurmState(slurm_stat="RUNNING")  # type: ignore[call-arg]  # a key Slurm's model lacks
    with pytest.raises(ValidationError):
        SlurmState(world_size="two")  # type: ignore[arg-type]
    partial = SlurmState(slurm_state="RUNNING", slurm_reason=None)
    assert partial.changes() == {"slurm_state": "RUNNING", "slurm_reason": None}
    stored = SlurmState.load({**LEGACY_SLURM, "slurm_reason": "Priority"})
    merged = stored.merged(partial)
    assert (merged.slurm_state, merged.slurm_reason, merged.slurm_id) == ("RUNNING", None, "42")
    # The row it makes is what a dict of the same fields made before this model was typed.
    as_dict = stored.merged({"slurm_state": "RUNNING", "slurm_reason": None})
    assert merged.stored() == as_dict.stored()
    assert stored.merged(SlurmState()) == stored  # nothing set: nothing changes
    with pytest.raises(TypeError, match="State"):
        JobUpdate(data={"slurm_state": "RUNNING"})  # type: ignore[arg-type]


def test_the_store_is_migrated_when_opened(
    hyperpod_config: dict[str, Any], partition: Path, tmp_path: Path
) -> None:
    settings = HyperPodSettings(**hyperpod_config)
    first = HyperPodService(settings)
    (partition / "quick.py").write_text("print('hi')\n")
    job = first.submit({"name": "quick", "command": ["quick.py"]})
    deadline = time.monotonic() + 30
    while first.job(job.id).state is not JobState.SUCCEEDED:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    first.close()
    with sqlite3.connect(settings.job_store) as db:  # a row as an older version wrote it
        (data,) = db.execute("SELECT data FROM jobs WHERE id = ?", (job.id,)).fetchone()
        legacy = {**json.loads(data), "events": ["old"], "queue_slot": 3}
        db.execute("UPDATE jobs SET data = ? WHERE id = ?", (json.dumps(legacy), job.id))

    seen: list[Any] = []

    class Spy(LocalOrchestrator):
        def log_reader(self, stored: StoredJob, rank: int) -> Any:
            seen.append(stored.data)
            return super().log_reader(stored, rank)

    second = HyperPodService(settings, Spy(settings=settings))
    try:
        found = second.store.get(job.id)
        assert found is not None and set(found[2]) <= set(LocalState.model_fields)
        assert "events" not in found[2] and "queue_slot" not in found[2]
        reader = second.log_reader(job.id, 0)
        assert reader.read(0, 100) == b"hi\n"
        reader.close()
        assert isinstance(seen[0], LocalState) and seen[0].job_dir
    finally:
        second.close()
