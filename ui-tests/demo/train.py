"""Demo training script for the UI tests: coloured lines and a progress bar redrawn in place."""

import sys
import time

STEPS = 16
print("\x1b[1mdemo training\x1b[0m: starting", flush=True)
for step in range(1, STEPS + 1):
    loss = 2.0 / step
    # Like tqdm.write: clear the bar's line, print a line, then redraw the bar under it.
    sys.stdout.write(f"\r\x1b[Kstep {step:02d}/{STEPS} loss=\x1b[33m{loss:.4f}\x1b[0m\n")
    bar = "#" * step + "." * (STEPS - step)
    sys.stdout.write(f"\rprogress [{bar}] {step * 100 // STEPS:3d}%")
    sys.stdout.flush()
    time.sleep(1.5)  # long enough for the panel to see it running (progress, ETA)
sys.stdout.write("\n")
print("\x1b[32mtraining finished\x1b[0m", flush=True)
