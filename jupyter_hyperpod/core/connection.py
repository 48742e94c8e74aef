"""The backend a service is connected to now, and the cluster it reaches: one object that the
job book, the submission path and the tracker all read, so that a switch of orchestrator
(`Connector.use_orchestrator`) is seen by every one of them at once."""

from __future__ import annotations

import threading
from pathlib import Path, PurePosixPath

from .backend import Orchestrator
from .settings import HyperPodSettings


class Connection:
    """The live orchestrator, the cluster's file system root and the cluster's name (asked of
    the backend once, on first use). `lock` is held by a status refresh and by a switch, never
    by a reader."""

    def __init__(self, settings: HyperPodSettings, fs_root: Path, orchestrator: Orchestrator):
        self.settings = settings
        self.fs_root = fs_root
        self.orchestrator = orchestrator
        self.cluster_root = self.root_of(orchestrator)
        self.name: str | None = None
        """The cluster's name once asked (None: not yet, `cluster_name` asks the backend)."""
        self.lock = threading.Lock()

    def root_of(self, orchestrator: Orchestrator) -> PurePosixPath:
        """Where the cluster's jobs see the shared file system, with this backend."""
        return PurePosixPath(
            self.settings.cluster_fs_root
            or orchestrator.default_cluster_fs_root
            or str(self.fs_root)
        )

    @property
    def kind(self) -> str:
        return self.orchestrator.kind

    @property
    def cluster_name(self) -> str:
        if self.name is None:
            self.name = self.orchestrator.cluster_name()
        return self.name

    def scope(self) -> tuple[str, str]:
        """(orchestrator kind, cluster name): what a stored job is bound to."""
        return self.orchestrator.kind, self.cluster_name

    def switch(self, new: Orchestrator, name: str) -> Orchestrator:
        """Connect to `new` (its cluster called `name`), under the lock; returns the old one,
        which the caller closes."""
        with self.lock:
            old = self.orchestrator
            self.orchestrator = new
            self.cluster_root = self.root_of(new)
            self.name = name
        return old
