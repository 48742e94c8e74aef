"""Run jobs as the owner of their partition, so that what they write is the IDE user's: the pod's
`securityContext` (runAsUser, runAsGroup and fsGroup: Kubernetes "Configure a Security Context
for a Pod or Container") from the partition directory's owner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PARTITION_MARK = ".hyperpod"  # the core keeps a partition's jobs in <partition>/.hyperpod/jobs


def partition_of(job_dir: Path) -> Path | None:
    """The partition that holds a job directory (<partition>/.hyperpod/jobs/<id>)."""
    for parent in job_dir.parents:
        if parent.name == PARTITION_MARK:
            return parent.parent
    return None


def pod_security_context(job_dir: Path) -> dict[str, Any] | None:
    """runAsUser/runAsGroup/fsGroup of the partition's owner; None when it is root's or unknown
    (a pod is never pinned to uid 0 by this)."""
    partition = partition_of(job_dir)
    if partition is None:
        return None
    try:
        info = partition.stat()
    except OSError:
        return None
    if info.st_uid == 0:
        return None
    return {"runAsUser": info.st_uid, "runAsGroup": info.st_gid, "fsGroup": info.st_gid}
