#!/usr/bin/env bash
# The whole test suite: lint, Python tests (real Jupyter server, real Slurm cluster, Kubernetes
# and AWS doubles over real HTTP, real CPU training), frontend unit tests, browser UI tests.
#   scripts/test.sh            everything
#   scripts/test.sh -k slurm   extra arguments go to pytest (the other suites still run)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

status=0
step() { echo; echo "==> $*"; }
run() { "$@" || { echo "!! failed: $*"; status=1; }; }

step "Python lint (ruff) and types (mypy)"
run ruff check .
run ruff format --check .
run mypy

step "Python tests (pytest)"
set +e
python3 -m pytest -ra "$@"
code=$?
set -e
# pytest's exit code 5 (no test collected) is a failure too.
[ "$code" -eq 0 ] || { echo "!! pytest exited $code"; status=1; }

step "Frontend lint and unit tests (eslint, prettier, stylelint, jest)"
run jlpm lint:check
run jlpm test

step "UI tests (Galata, headless chromium)"
run bash ui-tests/run.sh

echo
if [ "$status" -eq 0 ]; then echo "==> all test suites passed"; else echo "==> some test suites FAILED"; fi
exit "$status"
