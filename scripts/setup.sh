#!/usr/bin/env bash
# What the test suite needs, on a fresh Debian 12 machine: the Debian packages its real services
# come from (Slurm + munge + slurmdbd + MariaDB for the Slurm tests, chromium for the UI tests;
# installing them needs root), the project with every extra in its virtual environment
# (scripts/venv.sh) and the frontend's packages. Idempotent and quick when all is there.
# The demo (scripts/demo.sh) needs none of the Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES="slurm-wlm munge slurmdbd mariadb-server chromium prometheus acl gcc"  # prometheus: tests/gpu; acl: tests/admin; gcc: tests/gpu NVML stand-in
missing=""
for package in $APT_PACKAGES; do
  dpkg -s "$package" >/dev/null 2>&1 || missing="$missing $package"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "!! the tests need these Debian packages:$missing (run as root, or: sudo apt-get install$missing)"
    exit 1
  fi
  echo "==> apt-get install$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $missing >/dev/null; }
fi

source scripts/venv.sh
hyperpod_venv all
if [ ! -d node_modules/@jupyterlab/builder ] || [ yarn.lock -nt node_modules/.yarn-state.yml ]; then
  echo "==> jlpm install"
  jlpm install >/dev/null
fi
echo "==> setup done ($HYPERPOD_VENV)"
