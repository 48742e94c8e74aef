"""What the Kubernetes backend keeps with a job (`StoredJob.data`)."""

from __future__ import annotations

from typing import Any, ClassVar

from ...core.state import StrictState


class KubernetesState(StrictState):
    """The job object's coordinates and how its ranks map to pods."""

    retired: ClassVar[tuple[str, ...]] = ("events",)
    """Adopted jobs carried their first event here too; it lives on the job only."""

    namespace: str | None = None
    kind: str | None = None
    """PyTorchJob, HyperPodPyTorchJob, or a user's TrainJob."""
    group: str | None = None
    version: str | None = None
    plural: str | None = None
    workers: int | None = None
    """Worker pods (the job's nodes)."""
    split_ranks: bool = False
    """Several ranks per pod (torchrun --tee): each rank's lines are split out of the pod log."""
    job_dir_local: str | None = None
    """The job's directory on this machine (its spool of pod logs)."""
    faults: list[dict[str, Any]] = []
    """HyperPod's faults seen so far, one entry per restart (jobs.py record_faults)."""
    trainer_progress: dict[str, Any] | None = None
    """A TrainJob's progress as its trainer last reported it (status.trainerStatus, a
    JobProgress: trainjob.py)."""
