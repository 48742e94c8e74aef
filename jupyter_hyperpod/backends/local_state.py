"""What the local backend keeps with each job (its typed state, `core/state.py`), read by the
backend and by the local queue."""

from __future__ import annotations

from pathlib import Path

from ..core.state import StrictState


class LocalState(StrictState):
    """What the local backend keeps with a job."""

    job_dir: str | None = None
    """The job's directory on this machine (launch.json, status.json, rank-<N>.log)."""
    world_size: int | None = None
    pid: int | None = None
    """The supervisor's pid (the leader of the job's process group), once started."""
    pgid: str | None = None
    gpus: list[int] = []
    """The GPU indexes given to the job (CUDA_VISIBLE_DEVICES)."""
    uid: int | None = None
    """The uid the job's processes run as (this server's): whose job it is in the queue."""

    @property
    def path(self) -> Path:
        if not self.job_dir:
            raise ValueError("the job has no job directory")
        return Path(self.job_dir)
