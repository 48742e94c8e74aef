"""Orchestrator backends, imported lazily so that an unused backend's client library is optional.

Backends are found by name in the `jupyter_hyperpod.backends` entry-point group (the package
declares its own three there; another package adds one by declaring it too), or given as a class:
`c.HyperPodSettings.orchestrator_class` (a traitlets `Type`) or an import string
`module:Class` in place of a name.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ..core.errors import InvalidRequest
from .base import Orchestrator

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


def detect_orchestrator() -> str:
    """`auto`: kubernetes when a kubeconfig has a current context, slurm when sinfo answers, else local."""
    kubeconfig = os.environ.get("KUBECONFIG", str(Path.home() / ".kube" / "config"))
    for path in kubeconfig.split(os.pathsep):
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError:
            continue
        if "current-context:" in text and 'current-context: ""' not in text:
            return "kubernetes"
    sinfo = shutil.which("sinfo")
    if sinfo:
        try:
            result = subprocess.run(
                [sinfo, "-h", "-o", "%P"], capture_output=True, timeout=5, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            result = None
        if result is not None and result.returncode == 0:
            return "slurm"
    return "local"


def create_orchestrator(kind: str, settings: Any) -> Orchestrator:
    """The configured backend: `orchestrator_class` when set (a traitlets Type), else by name."""
    chosen = getattr(settings, "orchestrator_class", None)
    if chosen is not None:
        return chosen(settings=settings)  # type: ignore[no-any-return]
    if kind == "auto":
        kind = detect_orchestrator()
    return backend_class(kind)(settings=settings)
