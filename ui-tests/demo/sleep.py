"""Demo job that runs until it is cancelled."""

import time

print("waiting to be cancelled", flush=True)
for minute in range(5):
    time.sleep(60)
    print(f"still running after {minute + 1} min", flush=True)
