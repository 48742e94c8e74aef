#!/usr/bin/env bash
# Launches JupyterLab with the HyperPod panel on the local cluster (this machine as a one-node
# cluster: no cluster, no cloud account, no root needed), on a demo workspace. The first run makes
# the virtual environment .venv and installs the project into it (a few minutes; pip prints each
# package; torch's CPU build where nvidia-smi finds no GPU, HYPERPOD_TORCH=cpu|cuda to choose:
# README "How large"), then writes the workspace (python -m jupyter_hyperpod.demo).
# Beside it, an MLflow UI on the jobs' tracking store (a free port on 127.0.0.1): the panel's
# "Open in MLflow" links go there (HYPERPOD_DEMO_MLFLOW_UI=0: none); both stop together.
#   scripts/demo.sh [extra jupyter lab arguments]      HYPERPOD_DEMO_DIR=./demo-fs by default
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
hyperpod_venv demo

DEMO=$(realpath -m "${HYPERPOD_DEMO_DIR:-demo-fs}")
python -m jupyter_hyperpod.demo "$DEMO"
ROOT_FLAG=()
[ "$(id -u)" = 0 ] && ROOT_FLAG=(--allow-root)
ARGS=("${ROOT_FLAG[@]}"
  --ServerApp.root_dir="$DEMO/shared"
  --HyperPodApp.orchestrator=local
  --HyperPodApp.shared_fs_root="$DEMO"
  --HyperPodApp.partition=shared)
if [ "${HYPERPOD_DEMO_MLFLOW_UI:-1}" = 0 ] || ! command -v mlflow >/dev/null; then
  echo "==> starting JupyterLab: open the HyperPod panel (left sidebar), then qlora-demo/README.md"
  exec jupyter lab "${ARGS[@]}" "$@"
fi
# The server's default tracking store for the partition (HyperPodApp.mlflow_tracking_uri).
STORE="sqlite:///$DEMO/shared/.hyperpod/mlflow.db"
mkdir -p "$DEMO/shared/.hyperpod"
PORT=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mlflow ui --backend-store-uri "$STORE" --host 127.0.0.1 --port "$PORT" --workers 1 \
  > "$DEMO/mlflow-ui.log" 2>&1 &
MLFLOW=$!
echo "==> MLflow UI on http://127.0.0.1:$PORT (its log: $DEMO/mlflow-ui.log)"
echo "==> starting JupyterLab: open the HyperPod panel (left sidebar), then qlora-demo/README.md"
jupyter lab "${ARGS[@]}" --HyperPodApp.mlflow_ui_url="http://127.0.0.1:$PORT" "$@" &
LAB=$!
stop() { kill "$LAB" "$MLFLOW" 2>/dev/null || true; }
trap stop INT TERM
trap 'stop; wait' EXIT
wait "$LAB"
