"""Backends are pluggable: a traitlets `Type` (`orchestrator_class`), an entry point name, or an
import string; jobs stay bound to the cluster they were submitted to."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from traitlets import TraitError

from jupyter_hyperpod.backends import BUILTIN, backend_class, known_backends
from jupyter_hyperpod.backends.local import LocalOrchestrator
from jupyter_hyperpod.core.errors import InvalidRequest, NotConnected
from jupyter_hyperpod.core.service import HyperPodService
from jupyter_hyperpod.core.settings import HyperPodSettings


class NamedLocal(LocalOrchestrator):
    """A backend from "another package": the local one under another cluster name."""

    def cluster_name(self) -> str:
        return "plugged-in"


def test_the_type_trait_chooses_the_backend(hyperpod_config: dict[str, Any]) -> None:
    settings = HyperPodSettings(**hyperpod_config, orchestrator_class=f"{__name__}.NamedLocal")
    service = HyperPodService(settings)
    try:
        assert type(service.orchestrator) is NamedLocal
        assert service.cluster().name == "plugged-in"
    finally:
        service.close()
    with pytest.raises(TraitError):
        HyperPodSettings(orchestrator_class="jupyter_hyperpod.core.models.Job")


def test_names_come_from_the_entry_points_and_import_strings_work() -> None:
    assert set(BUILTIN) <= set(known_backends())
    assert backend_class("local") is LocalOrchestrator
    assert backend_class(f"{__name__}:NamedLocal") is NamedLocal
    with pytest.raises(InvalidRequest, match="known: local, slurm, kubernetes"):
        backend_class("nomad")
    with pytest.raises(InvalidRequest, match="not an Orchestrator"):
        backend_class("jupyter_hyperpod.core.models:Job")
    with pytest.raises(InvalidRequest, match="cannot load"):
        backend_class("no_such_module_here:Backend")
    with pytest.raises(TraitError, match="orchestrator must be auto or one of"):
        HyperPodSettings(orchestrator="nomad")


def test_the_pyproject_declares_the_builtin_entry_points() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    declared = project["project"]["entry-points"]["jupyter_hyperpod.backends"]
    assert declared == BUILTIN


class OtherMachine(LocalOrchestrator):
    """Another cluster of the same kind (what `aws/connect` to a second EKS cluster is)."""

    def cluster_name(self) -> str:
        return "other-machine"


def test_a_job_stays_bound_to_its_cluster(hyperpod_config: dict[str, Any], partition: Path) -> None:
    (partition / "wait.py").write_text("import time\ntime.sleep(60)\n")
    service = HyperPodService(HyperPodSettings(**hyperpod_config))
    try:
        job = service.submit({"name": "bound", "command": ["wait.py"]})
        assert job.state.value == "RUNNING" and job.backend_id
        home = service.cluster_name
        service.use_orchestrator(f"{__name__}:OtherMachine")
        assert service.cluster_name == "other-machine"

        with pytest.raises(NotConnected, match=f"cluster '{home}'"):
            service.cancel(job.id)  # never sent to the cluster we are connected to now
        with pytest.raises(NotConnected):
            service.log_reader(job.id, 0)
        assert _alive(int(job.backend_id)), "the job keeps running where it was"
        record = service.job(job.id)
        assert record.state.value == "RUNNING" and "connect to" in (record.stale_reason or "")
        assert job.id not in [j.id for j in service.jobs().jobs]

        service.use_orchestrator("local")
        assert service.cancel(job.id).state.value == "CANCELLED"
        assert not _alive(int(job.backend_id))
    finally:
        service.close()


def _alive(pgid: int) -> bool:
    """A process of the group still runs (zombies, not yet reaped by this process, do not)."""
    import os

    import psutil

    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


class Unreachable(LocalOrchestrator):
    """A backend whose cluster does not answer."""

    closed = False

    def cluster_name(self) -> str:
        raise NotConnected("the cluster does not answer")

    def close(self) -> None:
        type(self).closed = True
        super().close()


def test_a_switch_to_a_cluster_that_does_not_answer_leaves_the_service_as_it_was(
    hyperpod_config: dict[str, Any],
) -> None:
    service = HyperPodService(HyperPodSettings(**hyperpod_config))
    try:
        before = service.orchestrator
        with pytest.raises(NotConnected):
            service.use_orchestrator(f"{__name__}:Unreachable")
        assert service.orchestrator is before and Unreachable.closed
        assert service.cluster().name == before.cluster_name()
        switched = service.use_orchestrator(f"{__name__}:NamedLocal")
        assert switched.name == "plugged-in" and service.connection.name == "plugged-in"
    finally:
        service.close()


class Nomad(LocalOrchestrator):
    """A third party's backend with a kind of its own (its entry point's name)."""

    kind = "nomad"


def test_a_third_party_kind_is_a_plain_name_everywhere(
    hyperpod_config: dict[str, Any], partition: Path
) -> None:
    (partition / "hello.py").write_text("print('hello from nomad', flush=True)\n")
    settings = HyperPodSettings(**hyperpod_config, orchestrator_class=f"{__name__}.Nomad")
    service = HyperPodService(settings)
    try:
        assert service.cluster().orchestrator == "nomad"
        job = service.submit({"name": "hello", "command": ["hello.py"]})
        assert job.orchestrator == "nomad"
        for _ in range(300):
            if (found := service.job(job.id)).state.finished:
                break
            time.sleep(0.05)
        assert found.state.value == "SUCCEEDED", found
        assert [j.id for j in service.jobs().jobs] == [job.id]
    finally:
        service.close()
