"""IDE paths as the cluster sees them, in one place: the shared file system is mounted at
`fs_root` here and at the connection's `cluster_root` on the cluster. The MLflow tracking URI
of the jobs and of this server follow the same translation."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from .connection import Connection
from .errors import PathNotAllowed
from .partition import Partition
from .settings import HyperPodSettings

JOBS_DIR = ".hyperpod/jobs"
"""Each job's directory (logs, launch files), relative to the partition."""


class ClusterPaths:
    """Translate between this machine's paths and the cluster's (`connection` read live)."""

    def __init__(
        self, settings: HyperPodSettings, connection: Connection, partition: Partition
    ) -> None:
        self.settings = settings
        self.connection = connection
        self.partition = partition

    def to_cluster(self, path: Path) -> str:
        """An absolute path on this machine as the cluster's jobs see it: by its place under
        the file system's root when it names one (the partition's paths: the resolver has
        followed their links), else as it resolves (a link followed here)."""
        fs_root = self.connection.fs_root
        if path.is_absolute() and ".." not in path.parts and path.is_relative_to(fs_root):
            relative = path.relative_to(fs_root)
        else:
            relative = path.resolve().relative_to(fs_root)
        root = self.connection.cluster_root
        return str(root / relative.as_posix()) if relative.parts else str(root)

    def translate_text(self, value: str) -> str:
        """Rewrite an IDE path prefix inside an argument or env value (`--out=/home/.../fs/x`)."""
        root = str(self.connection.fs_root)
        cluster = str(self.connection.cluster_root)
        if root == cluster or root not in value:
            return value
        return value.replace(root + "/", cluster + "/") if value != root else cluster

    def job_dir(self, job_id: str) -> Path:
        """A job's directory on this machine."""
        return self.partition.root / JOBS_DIR / job_id

    @property
    def mlflow_uri_for_jobs(self) -> str:
        if self.settings.mlflow_tracking_uri:
            return str(self.settings.mlflow_tracking_uri)
        return f"sqlite:///{self.to_cluster(self.partition.root)}/.hyperpod/mlflow.db"

    def mlflow_uri_for_server(self, job_uri: str | None = None) -> str:
        """A job's tracking URI as this server opens it (a cluster path made local)."""
        uri = job_uri or self.mlflow_uri_for_jobs
        prefix = f"sqlite:///{self.connection.cluster_root}/"
        if uri.startswith(prefix):
            return f"sqlite:///{self.connection.fs_root}/{uri[len(prefix) :]}"
        return uri

    def check_cluster_path(self, path: str, field: str) -> None:
        """A path as the cluster sees it must be in the user's partition (through the one
        resolver: symlinks followed on this machine)."""
        partition = PurePosixPath(self.to_cluster(self.partition.root))
        if ".." in PurePosixPath(path).parts:
            raise PathNotAllowed(f"{field}: '{path}' has '..' (rule: paths)", field=field)
        try:
            relative = PurePosixPath(path).relative_to(partition)
        except ValueError:
            raise PathNotAllowed(
                f"{field}: '{path}' is outside your partition ({partition}) (rule: paths)",
                field=field,
            ) from None
        self.partition.resolve(relative.as_posix() if relative.parts else "", field=field)
