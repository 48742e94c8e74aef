#!/usr/bin/env bash
# A virtual environment with the oldest JupyterLab the panel supports, as SageMaker Studio ships
# it (SageMaker Distribution 1.0: aws/sagemaker-distribution
# build_artifacts/v1/v1.0/v1.0.0/cpu.env.out pins jupyterlab-4.0.7 and jupyter_server-2.8.0),
# plus the server extension's runtime dependencies from pyproject.toml. The extension itself
# comes from this checkout (PYTHONPATH, and the test config's extra labextensions path).
# Prints the environment's directory; made once, reused while pyproject.toml is unchanged.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
FLOOR_JUPYTERLAB="${FLOOR_JUPYTERLAB:-4.0.7}"
FLOOR_JUPYTER_SERVER="${FLOOR_JUPYTER_SERVER:-2.8.0}"
venv="${HYPERPOD_FLOOR_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/jupyter-hyperpod/jupyterlab-$FLOOR_JUPYTERLAB}"
stamp="$venv/.hyperpod-stamp"
want="$FLOOR_JUPYTERLAB $FLOOR_JUPYTER_SERVER $(sha256sum "$root/pyproject.toml" | cut -c1-16)"
if [ ! -x "$venv/bin/jupyter-lab" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  deps="$(python3 -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' "$root/pyproject.toml")"
  mapfile -t deps <<<"$deps"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "jupyterlab==$FLOOR_JUPYTERLAB" "jupyter_server==$FLOOR_JUPYTER_SERVER" "${deps[@]}" >&2
  echo "$want" >"$stamp"
fi
echo "$venv"
