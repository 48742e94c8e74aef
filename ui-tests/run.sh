#!/usr/bin/env bash
# Galata UI tests of the HyperPod panel, headless with Debian's chromium.
# Needs: the extension built (pip install -e . or jlpm build at the repository root),
# node/npm, /usr/bin/chromium, network for pip the first time (the floor environment). Writes
# screenshots to docs/screenshots/.
set -euo pipefail
cd "$(dirname "$0")"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [ ! -d node_modules/@jupyterlab/galata ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
# Build the frontend when it was never built or its sources changed since.
built=../jupyter_hyperpod/labextension/package.json
if [ ! -f "$built" ] || [ -n "$(find ../src ../style ../schema ../package.json -newer "$built" -print -quit)" ]; then
  (cd .. && jlpm install && jlpm build)
fi
# The server extension from this checkout, installed or not.
export PYTHONPATH="$(cd .. && pwd)${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p ../docs/screenshots
# The whole suite in the newest JupyterLab (this environment's), then, for a whole run, the smoke
# journey (tests/smoke.spec.ts) in the oldest JupyterLab the panel supports (floor-venv.sh).
# HYPERPOD_UI_FLOOR=0 skips the floor run, =only runs just it.
floor="${HYPERPOD_UI_FLOOR:-$([ $# -eq 0 ] && echo 1 || echo 0)}"
if [ "$floor" != only ]; then
  npx playwright test "$@"
fi
if [ "$floor" != 0 ]; then
  HYPERPOD_FLOOR_VENV="$(bash floor-venv.sh)"
  export HYPERPOD_FLOOR_VENV
  npx playwright test -c playwright.floor.config.js
fi
