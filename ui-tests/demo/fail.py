"""Demo job whose rank 1 fails first (rank 0 is then stopped by the launcher)."""

import os
import sys
import time

rank = int(os.environ.get("RANK", "0"))
for i in range(3):
    print(f"rank {rank} working {i}", flush=True)
    time.sleep(0.3)
if rank == 1:
    print("Traceback (most recent call last):", flush=True)
    print("ValueError: rank 1 ran out of data", flush=True)
    sys.exit(3)
time.sleep(60)
