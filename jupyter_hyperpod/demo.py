"""The demo workspace that `scripts/demo.sh` opens: examples to submit on the local cluster.

    python -m jupyter_hyperpod.demo <file system root>

writes, under `<root>/shared` (the `shared` partition):
- `examples/hello_ranks.py`: ranks that say hello and all-reduce over gloo;
- `examples/progress.py`: a tqdm bar, as training loops print it;
- `qlora-demo/`: a fine-tuning project (a tiny random model made here, a learnable dataset in the
  seed's schema, the scaffolded config) that trains on a laptop CPU in about a minute.

Every path the workspace tells the user (its README, the config's header) is partition-relative,
as the submit form and `jupyter hyperpod submit` take it. Existing files are kept, so re-running
the demo never overwrites the user's edits.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

PARTITION = "shared"
QLORA_PROJECT = "qlora-demo"

HELLO_RANKS = '''\
"""Each rank says hello, then they all-reduce their ranks with torch.distributed (gloo)."""
import os
import time

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print(f"\\033[1;32mrank {rank}/{world}\\033[0m on {os.uname().nodename}, "
      f"master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("torch is not installed: skipping the all-reduce", flush=True)
else:
    dist.init_process_group("gloo")
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    print(f"rank {rank}: sum of all ranks = {int(total.item())} "
          f"(expected {world * (world - 1) // 2})", flush=True)
    dist.destroy_process_group()
for step in range(1, 31):
    print(f"rank {rank}: step {step}/30 loss {2.0 / step:.4f}", flush=True)
    time.sleep(0.5)
'''

PROGRESS = '''\
"""A tqdm progress bar, as training loops print it: the log view renders it in place."""
import time

from tqdm import tqdm

for _ in tqdm(range(200), desc="epoch 1", ncols=80):
    time.sleep(0.05)
print("done")
'''


def write_demo(fs_root: str | Path, *, log: Callable[[str], None] = print) -> Path:
    """Write the demo workspace under `fs_root`; returns the partition directory."""
    partition = Path(fs_root).resolve() / PARTITION
    examples = partition / "examples"
    examples.mkdir(parents=True, exist_ok=True)
    for name, text in (("hello_ranks.py", HELLO_RANKS), ("progress.py", PROGRESS)):
        target = examples / name
        if not target.exists():
            target.write_text(text, encoding="utf-8")
    project = partition / QLORA_PROJECT
    if not project.exists():
        log("==> writing the QLoRA demo project (a tiny model made here: no model hub needed)")
        write_qlora_project(project, partition=partition)
    return partition


def write_qlora_project(project: Path, *, partition: Path) -> None:
    """A tiny random Qwen2 model and a learnable dataset, then the scaffolded project."""
    from .training.scaffold import scaffold_project
    from .training.synthetic import (
        build_random_model,
        small_tokenizer,
        write_synthetic_dataset,
    )

    staging = project.with_name(project.name + ".partial")
    staging.mkdir(parents=True, exist_ok=True)
    build_random_model(
        staging / "tiny-model",
        tokenizer=small_tokenizer(),
        hidden_size=64,
        num_layers=2,
        initializer_range=0.2,
    )
    write_synthetic_dataset(staging / "reasoning.jsonl", 160)
    staging.rename(project)  # all or nothing: a half-written project is never left behind
    # The model is named relative to the config, so the project works wherever it is mounted.
    scaffold_project(
        project, model_id="tiny-model", dataset="reasoning.jsonl", relative_to=partition
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jupyter_hyperpod.demo", description=__doc__)
    parser.add_argument(
        "fs_root", help="the demo's file system root (the partition is <root>/shared)"
    )
    args = parser.parse_args(argv)
    partition = write_demo(args.fs_root)
    print(f"==> demo workspace: {partition} (partition '{PARTITION}')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
