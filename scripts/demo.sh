#!/usr/bin/env bash
# Installs everything, writes a small demo workspace and launches JupyterLab with the HyperPod panel
# on the local cluster (this machine as a one-node cluster: no cluster, no cloud account needed).
#   scripts/demo.sh [extra jupyter lab arguments]      HYPERPOD_DEMO_DIR=./demo-fs by default
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

DEMO=$(realpath -m "${HYPERPOD_DEMO_DIR:-demo-fs}")
EXAMPLES="$DEMO/shared/examples"
mkdir -p "$EXAMPLES"
cat > "$EXAMPLES/hello_ranks.py" <<'PY'
"""Each rank says hello, then they all-reduce their ranks with torch.distributed (gloo)."""
import os
import time

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print(f"\033[1;32mrank {rank}/{world}\033[0m on {os.uname().nodename}, "
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
    print(f"rank {rank}: sum of all ranks = {int(total.item())} (expected {world * (world - 1) // 2})", flush=True)
    dist.destroy_process_group()
for step in range(1, 31):
    print(f"rank {rank}: step {step}/30 loss {2.0 / step:.4f}", flush=True)
    time.sleep(0.5)
PY
cat > "$EXAMPLES/progress.py" <<'PY'
"""A tqdm progress bar, as training loops print it: the log view renders it in place."""
import time

from tqdm import tqdm

for _ in tqdm(range(200), desc="epoch 1", ncols=80):
    time.sleep(0.05)
print("done")
PY
if python3 -c "import jupyter_hyperpod.training" >/dev/null 2>&1 && [ ! -d "$DEMO/shared/qlora-demo" ]; then
  python3 -m jupyter_hyperpod.training scaffold "$DEMO/shared/qlora-demo" --demo >/dev/null 2>&1 || true
fi
echo "==> demo workspace: $DEMO (partition: $DEMO/shared)"
ROOT_FLAG=()
[ "$(id -u)" = 0 ] && ROOT_FLAG=(--allow-root)
exec jupyter lab "${ROOT_FLAG[@]}" \
  --ServerApp.root_dir="$DEMO" \
  --HyperPodApp.orchestrator=local \
  --HyperPodApp.shared_fs_root="$DEMO" \
  --HyperPodApp.partition=shared \
  "$@"
