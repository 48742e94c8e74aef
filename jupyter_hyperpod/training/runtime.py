"""Process-level setup: torch.distributed from the environment, device, logging, seeds.

Works when started once per rank with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT already set (our
local backend's "plain" launcher) and under torchrun (Slurm, Kubernetes) alike.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("jupyter_hyperpod.training")


@dataclass
class Runtime:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    device: Any  # torch.device
    distributed: bool

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def broadcast_object(self, value: Any) -> Any:
        """Rank 0's value, on every rank."""
        if not self.distributed:
            return value
        import torch.distributed as dist

        holder = [value]
        dist.broadcast_object_list(holder, src=0)
        return holder[0]

    def gather_to_main(self, value: Any) -> list[Any]:
        """Every rank's value, in rank order, on rank 0 (an empty list elsewhere)."""
        if not self.distributed:
            return [value]
        import torch.distributed as dist

        holder: list[Any] | None = [None] * self.world_size if self.is_main else None
        dist.gather_object(value, holder, dst=0)
        return holder or []

    def close(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def setup_logging(rank: int = 0) -> None:
    prefix = f"[rank {rank}] " if int(os.environ.get("WORLD_SIZE", "1")) > 1 else ""
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s {prefix}%(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stdout,
        force=True,
    )
    for noisy in ("urllib3", "filelock", "httpx", "alembic", "mlflow.store.db.utils"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def init_runtime() -> Runtime:
    import torch

    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))
    setup_logging(rank)
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        if "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world)))
    # Under torchrun (or our local launcher) even one rank joins a process group, so that a
    # single-GPU job can still use FSDP (e.g. its CPU offload).
    distributed = world_size > 1 or ("MASTER_ADDR" in os.environ and "WORLD_SIZE" in os.environ)
    if distributed:
        import datetime

        import torch.distributed as dist

        if not dist.is_initialized():
            backend = "nccl" if device.type == "cuda" else "gloo"
            dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
    return Runtime(rank, local_rank, world_size, local_world, device, distributed)


def seed_everything(seed: int) -> None:
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
