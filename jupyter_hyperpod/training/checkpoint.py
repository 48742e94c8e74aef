"""Checkpoints every N steps and resume from the last complete one (what makes auto-resume resume).

Each rank writes its own shards of the trainable (LoRA) weights and the optimizer state with
torch.distributed.checkpoint, so saving never gathers a model on one rank and a checkpoint loads
on a different number of ranks. A checkpoint is complete once its directory is renamed from
`.tmp`: a job killed mid-save resumes from the previous one.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

from .runtime import Runtime

log = logging.getLogger("jupyter_hyperpod.training")

STATE_FILE = "trainer_state.json"
_NAME = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_dir(root: Path, step: int) -> Path:
    return root / f"checkpoint-{step:07d}"


def list_checkpoints(root: Path) -> list[tuple[int, Path]]:
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        match = _NAME.match(entry.name)
        if match and entry.is_dir() and (entry / STATE_FILE).is_file():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def latest_checkpoint(root: Path) -> Path | None:
    found = list_checkpoints(root)
    return found[-1][1] if found else None


def checkpoint_state(path: Path) -> dict[str, Any]:
    """The trainer state saved with a checkpoint (step, loss, job_id...); {} when unreadable."""
    try:
        found = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def another_jobs_finished_run(path: Path, total_steps: int, job_id: str) -> str | None:
    """The job id whose run `path` finished, when that is not `job_id` (a rerun into the same
    output_dir): such a run is not resumed, it is trained again. An unfinished one (a
    resubmit after a failure) or this job's own (a restart) is resumed."""
    state = checkpoint_state(path)
    other = str(state.get("job_id") or "")
    done = int(state.get("step") or 0) >= total_steps
    return other if done and other and job_id and other != job_id else None


def set_aside(root: Path, job_id: str) -> Path:
    """Move every checkpoint in `root` under `root/earlier-runs/<job_id>/` (kept, no longer
    resumed nor rotated away by the next run's `save_total_limit`)."""
    target = root / "earlier-runs" / job_id
    target.mkdir(parents=True, exist_ok=True)
    for _, path in list_checkpoints(root):
        shutil.rmtree(target / path.name, ignore_errors=True)
        path.rename(target / path.name)
    return target


def _trainable_state(model: Any) -> dict[str, Any]:
    from .model import unwrap

    return {name: p.detach() for name, p in unwrap(model).named_parameters() if p.requires_grad}


def save_checkpoint(
    root: Path,
    step: int,
    model: Any,
    optimizer: Any,
    trainer_state: dict[str, Any],
    runtime: Runtime,
    keep: int,
) -> Path:
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    final = checkpoint_dir(root, step)
    tmp = final.with_name(final.name + ".tmp")
    if runtime.is_main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    runtime.barrier()
    state = {"model": _trainable_state(model), "optim": get_optimizer_state_dict(model, optimizer)}
    dcp.save(state, checkpoint_id=str(tmp))
    (tmp / "rng").mkdir(exist_ok=True)
    torch.save(
        {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
        },
        tmp / "rng" / f"rank-{runtime.rank}.pt",
    )
    runtime.barrier()
    if runtime.is_main:
        (tmp / STATE_FILE).write_text(
            json.dumps({**trainer_state, "world_size": runtime.world_size}, indent=1)
        )
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for _, old in list_checkpoints(root)[: -max(1, keep)]:
            shutil.rmtree(old, ignore_errors=True)
    runtime.barrier()
    return final


def load_checkpoint(path: Path, model: Any, optimizer: Any, runtime: Runtime) -> dict[str, Any]:
    """Load weights and optimizer state in place; returns the trainer state saved with them."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_optimizer_state_dict,
        set_optimizer_state_dict,
    )

    state = {"model": _trainable_state(model), "optim": get_optimizer_state_dict(model, optimizer)}
    dcp.load(state, checkpoint_id=str(path))
    set_optimizer_state_dict(model, optimizer, state["optim"])
    trainer_state = json.loads((path / STATE_FILE).read_text())
    rng_file = path / "rng" / f"rank-{runtime.rank}.pt"
    if rng_file.is_file() and trainer_state.get("world_size") == runtime.world_size:
        rng = torch.load(rng_file, weights_only=False)
        torch.set_rng_state(rng["torch"])
        if rng.get("cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state(rng["cuda"])
    else:
        log.warning(
            "resuming on %d ranks from a %s-rank checkpoint: dropout RNG streams restart",
            runtime.world_size,
            trainer_state.get("world_size"),
        )
    return trainer_state
