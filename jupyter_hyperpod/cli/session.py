"""Which implementation of the API the verbs use: the REST client of the running Jupyter server
for this user (named by --url or $JUPYTER_HYPERPOD_URL, the server this process runs under, or
any running server with the extension), else the core in this process, configured by the same
Jupyter configuration files, after one line on stderr that says so and on which partition."""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ..client import HyperPodClient, ancestor_pids, running_servers
from ..core.api import HyperPodAPI
from ..core.errors import HyperPodError

PROBE_TIMEOUT = 2.0
"""Seconds a running server may take to answer `GET cluster` before it is passed over."""


CONFIG_BASES = ("jupyter_config", "jupyter_server_config", "jupyter_jupyter_hyperpod_config")


def load_jupyter_config(paths: Sequence[str] | None = None) -> Any:
    """The Jupyter server's configuration files (py and json, and jupyter_server_config.d/*.json),
    lowest priority first, as one traitlets Config."""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import (
        ConfigFileNotFound,
        JSONFileConfigLoader,
        PyFileConfigLoader,
    )

    config = Config()
    search = list(paths) if paths is not None else jupyter_config_path()
    for path in reversed(search):
        for conf_d in sorted(glob.glob(os.path.join(path, "jupyter_server_config.d", "*.json"))):
            try:
                with open(conf_d, encoding="utf-8") as handle:
                    config.merge(Config(json.load(handle)))
            except (OSError, ValueError):
                continue
    for path in reversed(search):
        for base in CONFIG_BASES:
            for loader_class in (PyFileConfigLoader, JSONFileConfigLoader):
                suffix = ".py" if loader_class is PyFileConfigLoader else ".json"
                try:
                    config.merge(loader_class(base + suffix, path=path).load_config())
                except ConfigFileNotFound:
                    continue
    return config


def load_settings(config: Any = None) -> Any:
    """`HyperPodSettings` as the server would have them: c.HyperPodApp.* applies too."""
    from traitlets.config import Config

    from ..core.settings import HyperPodSettings

    config = load_jupyter_config() if config is None else config
    merged = Config()
    merged.merge(config)
    if "HyperPodApp" in config:
        merged.merge(Config({"HyperPodSettings": config.HyperPodApp}))
    return HyperPodSettings(config=merged)


def find_api_server(*, timeout: float = PROBE_TIMEOUT) -> HyperPodClient | None:
    """The running Jupyter server of this user that serves the hyperpod API: the one this process
    runs under first (a kernel or a terminal of it), then the others, newest first. Each is asked
    `GET hyperpod/api/cluster` with its token (`jupyter server list` reads the same files)."""
    ancestors = ancestor_pids()
    servers = sorted(
        running_servers(),
        key=lambda info: (info.get("pid") not in ancestors, -_started(info)),
    )
    for info in servers:
        parent = info.get("pid") in ancestors
        source = f"{'parent' if parent else 'running'} Jupyter server (pid {info.get('pid')})"
        client = HyperPodClient(
            info["url"], info.get("token", "") or None, timeout=timeout, source=source
        )
        try:
            client.cluster()
        except HyperPodError:
            continue  # no extension, another user's token, or not answering
        client.timeout = 60.0
        return client
    return None


def _started(info: dict[str, Any]) -> float:
    try:
        return os.stat(info.get("info_file", "")).st_mtime
    except OSError:
        return 0.0


def server_client(args: argparse.Namespace) -> HyperPodClient | None:
    """The REST client when a server is named or found; None with --direct or without one."""
    if getattr(args, "direct", False):
        return None
    url = getattr(args, "url", None) or os.environ.get("JUPYTER_HYPERPOD_URL", "")
    token = getattr(args, "token", None)
    if url:
        source = "given" if getattr(args, "url", None) else "$JUPYTER_HYPERPOD_URL"
        return HyperPodClient(url, token, source=source)
    found = find_api_server()
    if found is not None and token:
        found.token = token
    return found


def standalone_service(args: argparse.Namespace, note: TextIO | None = None) -> HyperPodAPI:
    """The core in this process, with the Jupyter configuration files; says so on `note`.
    It creates no partition directory: only a submit does."""
    from traitlets.config import Config

    from ..core.service import HyperPodService
    from ..wiring import Wiring

    extra = Config()
    if getattr(args, "kubeconfig", None):
        extra.KubernetesOrchestrator.kubeconfig = args.kubeconfig
    if getattr(args, "profile", None):
        os.environ["AWS_PROFILE"] = args.profile  # boto3's sessions in this process use it
    config = load_jupyter_config()
    config.merge(extra)
    service = HyperPodService(load_settings(config), create_partition=False, adapters=Wiring())
    if note is not None:
        why = (
            "--direct"
            if getattr(args, "direct", False)
            else "no Jupyter server with jupyter-hyperpod runs for this user"
        )
        note.write(
            f"standalone ({why}): the core runs in this process, {service.orchestrator.kind} "
            f"orchestrator, partition {service.partition.root}\n"
        )
        note.flush()
    return service


def open_api(args: argparse.Namespace, note: TextIO | None = None) -> HyperPodAPI:
    """The server's REST API when there is one for us, else the core in this process (said on
    `note`, default: stderr as it is now)."""
    client = server_client(args)
    if client is None:
        return standalone_service(args, note or sys.stderr)
    if getattr(args, "kubeconfig", None) or getattr(args, "profile", None):
        from .exits import EXIT_USAGE, CommandError

        raise CommandError(
            f"{client.description} uses its own AWS credentials and kubeconfig: drop "
            "--kubeconfig/--profile, or add --direct to connect this process only",
            EXIT_USAGE,
        )
    return client


__all__ = ["find_api_server", "load_jupyter_config", "load_settings", "open_api"]
