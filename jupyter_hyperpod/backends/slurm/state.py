"""What the Slurm backend keeps with a job (`StoredJob.data`)."""

from __future__ import annotations

from typing import ClassVar

from ...core.state import StrictState


class SlurmState(StrictState):
    """The Slurm job, where its output goes and what Slurm last said of it.

    Its events live on the job only (`Job.events`): older versions kept them here as well."""

    retired: ClassVar[tuple[str, ...]] = ("events",)

    slurm_id: str | None = None
    stdout: str | None = None
    """Rank 0's output as the cluster sees it: the script's path, then Slurm's own StdOut."""
    stdout_known: bool = False
    """stdout is Slurm's word (scontrol's StdOut), not our guess."""
    job_dir: str | None = None
    """The job's directory as the cluster sees it."""
    job_dir_local: str | None = None
    """The same directory as this machine sees it."""
    script: str | None = None
    world_size: int | None = None
    procs_per_node: int | None = None
    torchrun: bool = False
    slurm_state: str | None = None
    """Slurm's own state word (PENDING, RUNNING, COMPLETING, ...)."""
    slurm_reason: str | None = None
    nodes: str | None = None
    """The node list Slurm gave the job."""
    restarts: int = 0
    """How often the job's ranks were restarted so far, from their records (rank_runs.py)."""
    gpu_index: dict[str, list[str]] | None = None
    """The GPUs the job holds on each node ({node: [index]}, from `scontrol -d show job`)."""
    workdir: str | None = None
    """An adopted job's working directory (WorkDir)."""
    task_logs: bool = False
    """Every rank, rank 0 too, writes `rank-<N>.log` (a user's own script: its sruns' output,
    user_script.py); `stdout` is then the script's own output, with srun's messages."""
