"""Which backends exist: names of the `jupyter_hyperpod.backends` entry-point group (this package
declares its own three there; another package adds one by declaring it too), or an import
string `module:Class`. Only names and import strings live here: a backend's module is imported
when it is asked for, so an unused backend's client library is optional.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from .backend import Orchestrator
from .errors import InvalidRequest
from .state import BackendState, registered_state

ENTRY_POINTS = "jupyter_hyperpod.backends"
BUILTIN: dict[str, str] = {
    "local": "jupyter_hyperpod.backends.local:LocalOrchestrator",
    "slurm": "jupyter_hyperpod.backends.slurm.backend:SlurmOrchestrator",
    "kubernetes": "jupyter_hyperpod.backends.kubernetes.backend:KubernetesOrchestrator",
}
"""This package's own entry points (pyproject.toml), also used while its metadata is not installed."""


def known_backends() -> dict[str, str]:
    """Backend name -> `module:Class`, from the entry points (installed packages) and ours."""
    found = dict(BUILTIN)
    for entry in entry_points(group=ENTRY_POINTS):
        found[entry.name] = entry.value
    return found


def backend_class(kind: str) -> type[Orchestrator]:
    """The class of a backend name (an entry point) or of an import string `module:Class`."""
    known = known_backends()
    target = known.get(kind) or (kind if ":" in kind else None)
    if target is None:
        raise InvalidRequest(f"unknown orchestrator '{kind}' (known: {', '.join(known)})")
    module_name, _, class_name = target.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        raise InvalidRequest(f"cannot load the orchestrator '{kind}': {error}") from None
    if not (isinstance(found, type) and issubclass(found, Orchestrator)):
        raise InvalidRequest(f"'{target}' is not an Orchestrator class")
    return found


def state_class(kind: str) -> type[BackendState]:
    """The state model of the backend of that kind (`Orchestrator.State`; its module is
    imported if it was not yet)."""
    state = registered_state(kind)
    if state is None:
        try:
            state = backend_class(kind).State
        except InvalidRequest:  # an unknown or uninstallable backend: keep its keys as they are
            return BackendState
    return state
