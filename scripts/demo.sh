#!/usr/bin/env bash
# Launches JupyterLab with the HyperPod panel on the local cluster (this machine as a one-node
# cluster: no cluster, no cloud account, no root needed), on a demo workspace. The first run makes
# the virtual environment .venv and installs the project into it (a few minutes; pip prints each
# package; torch's CPU build where nvidia-smi finds no GPU, HYPERPOD_TORCH=cpu|cuda to choose:
# README "How large"), then writes the workspace (python -m jupyter_hyperpod.demo).
#   scripts/demo.sh [extra jupyter lab arguments]      HYPERPOD_DEMO_DIR=./demo-fs by default
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
hyperpod_venv demo

DEMO=$(realpath -m "${HYPERPOD_DEMO_DIR:-demo-fs}")
python -m jupyter_hyperpod.demo "$DEMO"
echo "==> starting JupyterLab: open the HyperPod panel (left sidebar), then qlora-demo/README.md"
ROOT_FLAG=()
[ "$(id -u)" = 0 ] && ROOT_FLAG=(--allow-root)
exec jupyter lab "${ROOT_FLAG[@]}" \
  --ServerApp.root_dir="$DEMO/shared" \
  --HyperPodApp.orchestrator=local \
  --HyperPodApp.shared_fs_root="$DEMO" \
  --HyperPodApp.partition=shared \
  "$@"
