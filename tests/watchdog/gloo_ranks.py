"""Two (or more) gloo ranks that print our training loop's step lines, for the watchdog tests.

argv: MODE STEPS STEP_SECONDS. MODE:
- `hang`: an all_reduce every step; at step HANG_AT rank HANG_RANK sleeps before its all_reduce
  (`sleep_before_all_reduce`), so every other rank waits inside all_reduce;
- `straggler`: the ranks step on their own (one all_reduce at the end); rank SLOW_RANK takes
  three times as long per step;
- `slow`: an all_reduce every step, every rank equally slow.
"""

import os
import sys
import time

import torch
import torch.distributed as dist


def sleep_before_all_reduce(seconds: float) -> None:
    time.sleep(seconds)


def main() -> None:
    mode, steps, step_seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    tensor = torch.ones(4)
    hang_at = int(os.environ.get("HANG_AT", "5"))
    for step in range(1, steps + 1):
        pause = step_seconds
        if mode == "straggler" and rank == int(os.environ.get("SLOW_RANK", "1")):
            pause *= 3
        time.sleep(pause)
        if mode in ("hang", "slow"):
            if mode == "hang" and step == hang_at and rank == int(os.environ.get("HANG_RANK", "1")):
                sleep_before_all_reduce(3600)
            dist.all_reduce(tensor)
        print(f"step {step}/{steps} | loss {1.0 / step:.4f} | lr 1.00e-04", flush=True)
    dist.all_reduce(tensor)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
