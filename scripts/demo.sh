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
if [ ! -d "$DEMO/shared/qlora-demo" ]; then
  # A fine-tuning project that runs on this CPU in a minute: a tiny random Qwen2 model and a
  # learnable dataset in the seed's schema, made here (no model hub), then the scaffolded config.
  echo "==> writing the QLoRA demo project (tiny model made locally)"
  python3 - "$DEMO/shared/qlora-demo" <<'PY'
import sys
from pathlib import Path

from jupyter_hyperpod.training.synthetic import build_random_model, small_tokenizer, write_synthetic_dataset

project = Path(sys.argv[1])
project.mkdir(parents=True)
build_random_model(project / "tiny-model", tokenizer=small_tokenizer(), hidden_size=64, num_layers=2,
                   initializer_range=0.2)
write_synthetic_dataset(project / "reasoning.jsonl", 160)
PY
  python3 -m jupyter_hyperpod.training scaffold "$DEMO/shared/qlora-demo" \
    --model-id tiny-model --dataset reasoning.jsonl >/dev/null
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
