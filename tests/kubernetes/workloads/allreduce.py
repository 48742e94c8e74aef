"""Each rank joins the process group its launcher set up (gloo), all-reduces its rank + 1 and
prints what it got, with the pod it runs in."""

from __future__ import annotations

import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"rank {rank}/{world} on {socket.gethostname()}: all_reduce {value.item():.0f}", flush=True)
dist.barrier()
dist.destroy_process_group()
