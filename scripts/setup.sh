#!/usr/bin/env bash
# Installs everything jupyter-hyperpod needs to run and to be tested, on a fresh Debian 12 machine
# (root): Debian packages (Slurm + munge for the Slurm tests, chromium for the UI tests), the Python
# package with all extras (torch pinned to the CPU build), and the frontend. Idempotent and quick
# when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES="slurm-wlm munge slurmdbd mariadb-server chromium prometheus"  # prometheus: tests/gpu
missing=""
for package in $APT_PACKAGES; do
  dpkg -s "$package" >/dev/null 2>&1 || missing="$missing $package"
done
if [ -n "$missing" ]; then
  echo "==> apt-get install$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $missing >/dev/null; }
fi

PYTHON=${PYTHON:-python3}
# torch pinned to the CPU build on local disk; kubernetes below 37.0.2 (its newer release conflicts
# with botocore and makes pip backtrack for many minutes).
if ! "$PYTHON" -c "import jupyter_hyperpod, torch, kmock, pytest_jupyter" >/dev/null 2>&1 \
   || [ pyproject.toml -nt "$("$PYTHON" -c 'import jupyter_hyperpod,os; print(os.path.dirname(jupyter_hyperpod.__file__))' 2>/dev/null || echo /nonexistent)/_version.py" ] \
   || [ ! -f jupyter_hyperpod/labextension/package.json ]; then
  echo "==> pip install -e .[all] (builds the labextension)"
  "$PYTHON" -m pip install -q --disable-pip-version-check "torch==2.13.0" "kubernetes<37.0.2"
  "$PYTHON" -m pip install -q --disable-pip-version-check -e ".[all]" "torch==2.13.0" "kubernetes<37.0.2"
fi
if [ ! -d node_modules/@jupyterlab/builder ]; then
  echo "==> jlpm install"
  jlpm install >/dev/null
fi
echo "==> setup done"
