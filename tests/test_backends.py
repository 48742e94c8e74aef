"""Backends are pluggable: a traitlets `Type` (`orchestrator_class`), an entry point name, or an
import string; jobs stay bound to the cluster they were submitted to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from traitlets import TraitError

from jupyter_hyperpod.backends import BUILTIN, backend_class, known_backends
from jupyter_hyperpod.backends.local import LocalOrchestrator
from jupyter_hyperpod.core.errors import InvalidRequest
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
