"""Orchestrator backends, imported lazily so that an unused backend's client library is optional.

The interface they implement is `core/backend.py`, their typed state `core/state.py`, their
registry `core/registry.py` (re-exported here). Backends are found by name in the
`jupyter_hyperpod.backends` entry-point group (the package declares its own three there; another
package adds one by declaring it too), or given as a class: `c.HyperPodSettings.orchestrator_class`
(a traitlets `Type`) or an import string `module:Class` in place of a name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ..core.backend import Orchestrator
from ..core.environment import paths_of, service_account
from ..core.registry import BUILTIN, ENTRY_POINTS, backend_class, known_backends

__all__ = [
    "BUILTIN",
    "ENTRY_POINTS",
    "backend_class",
    "create_orchestrator",
    "detect_orchestrator",
    "known_backends",
]


def detect_orchestrator(settings: Any = None) -> str:
    """`auto`: kubernetes when a kubeconfig has a current context or this is a pod with a service
    account (a HyperPod Space), slurm when sinfo answers, else local."""
    if service_account(paths_of(settings)) is not None:
        return "kubernetes"
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
        kind = detect_orchestrator(settings)
    return backend_class(kind)(settings=settings)
