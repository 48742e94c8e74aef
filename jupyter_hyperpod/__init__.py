"""jupyter-hyperpod: JupyterLab as the login node of a GPU training cluster."""

from __future__ import annotations

from typing import Any

try:
    from ._version import __version__
except ImportError:  # running from a source tree that was never built
    __version__ = "0.0.0.dev0"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-hyperpod"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .app import HyperPodApp

    return [{"module": "jupyter_hyperpod", "app": HyperPodApp}]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext jupyter_hyperpod` registers the `%hyperpod` magics."""
    from .magics import register

    register(ipython)
