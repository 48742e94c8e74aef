"""Orchestrator backends, imported lazily so that an unused backend's client library is optional."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ..core.errors import InvalidRequest
from .base import Orchestrator

BACKENDS: dict[str, str] = {
    "local": "jupyter_hyperpod.backends.local:LocalOrchestrator",
    "slurm": "jupyter_hyperpod.backends.slurm.backend:SlurmOrchestrator",
    "kubernetes": "jupyter_hyperpod.backends.kubernetes.backend:KubernetesOrchestrator",
}


def backend_class(kind: str) -> type[Orchestrator]:
    try:
        target = BACKENDS[kind]
    except KeyError:
        raise InvalidRequest(
            f"unknown orchestrator '{kind}' (known: {', '.join(BACKENDS)})"
        ) from None
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)  # type: ignore[no-any-return]


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
    if kind == "auto":
        kind = detect_orchestrator()
    return backend_class(kind)(settings=settings)
