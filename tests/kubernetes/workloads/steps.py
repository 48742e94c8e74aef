"""A training-shaped program for the kubelet double's pods (no torch: fast to start): each rank
logs its steps, checkpoints each one on the shared FS, and resumes from its checkpoint when it is
started again. Its rank and world size come from the launcher (torchrun / hyperpodrun set RANK
and WORLD_SIZE). Knobs: FAKE_STEPS (3), FAKE_STEP_SECONDS (0.02), FAKE_START_DELAY (0),
FAKE_FAIL_RANK (that rank ends with exit 1)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

rank = int(os.environ.get("RANK", "0"))
world = int(os.environ.get("WORLD_SIZE", "1"))
steps = int(os.environ.get("FAKE_STEPS", "3"))
pause = float(os.environ.get("FAKE_STEP_SECONDS", "0.02"))
time.sleep(float(os.environ.get("FAKE_START_DELAY", "0")))
checkpoint = Path(os.environ["HYPERPOD_JOB_DIR"]) / f"checkpoint-rank-{rank}"
first = 0
if checkpoint.exists():
    done = int(checkpoint.read_text())
    print(f"rank {rank}/{world} resumed from checkpoint at step {done}", flush=True)
    first = done + 1
for step in range(first, steps):
    print(f"rank {rank}/{world} step {step} loss {1.0 / (step + 1):.4f}", flush=True)
    partial = checkpoint.with_suffix(".tmp")
    partial.write_text(str(step))
    partial.replace(checkpoint)
    time.sleep(pause)
if os.environ.get("FAKE_FAIL_RANK") == str(rank):
    print(f"rank {rank}/{world} RuntimeError: CUDA error: an illegal memory access", flush=True)
    sys.exit(1)
print(f"rank {rank}/{world} done", flush=True)
