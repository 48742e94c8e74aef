# Sourced by demo.sh and setup.sh: makes the project's virtual environment (once), installs the
# project into it editable with the extras asked for (again only when pyproject.toml or
# package.json changed), and puts it first on PATH. Needs no root: Python 3.10+ with venv, and
# Node.js for the labextension build. pip prints each package as it goes.
#   hyperpod_venv EXTRAS          e.g. hyperpod_venv all
# HYPERPOD_VENV picks the environment (default .venv in the checkout); PYTHON the interpreter
# that makes it (default python3). HYPERPOD_TORCH=auto|cpu|cuda picks torch's build (auto: CUDA
# where nvidia-smi lists a GPU, else the CPU build; scripts/torch_build.py says how).

HYPERPOD_VENV=$(realpath -m "${HYPERPOD_VENV:-.venv}")

hyperpod_venv() {
  local extras=$1
  if [ ! -x "$HYPERPOD_VENV/bin/python" ]; then
    echo "==> creating the virtual environment $HYPERPOD_VENV"
    "${PYTHON:-python3}" -m venv "$HYPERPOD_VENV"
    # A distribution's pip can be old (Debian 12's is 23.0): a current one is faster and builds
    # packages without setup.py the modern way.
    "$HYPERPOD_VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  fi
  local digest stamp torch_choice torch_build torch_state
  digest=$(cat pyproject.toml package.json | sha256sum | cut -c1-16)
  stamp="$HYPERPOD_VENV/.jupyter-hyperpod-installed"
  # torch's build: its line of output is the build, whether the venv holds another, pip's args.
  torch_choice=$("$HYPERPOD_VENV/bin/python" scripts/torch_build.py) || return 1
  torch_build=$(sed -n 1p <<<"$torch_choice")
  torch_state=$(sed -n 2p <<<"$torch_choice")
  local torch_args=()
  mapfile -t torch_args < <(sed -n '3,$p' <<<"$torch_choice")
  # Up to date when this digest was installed with these extras, or with all of them.
  if ! grep -qxE "$digest ($extras|all)" "$stamp" 2>/dev/null \
     || [ "$torch_state" != ok ] \
     || [ ! -f jupyter_hyperpod/labextension/package.json ]; then
    if [ "$torch_state" = remove ]; then
      echo "==> removing the venv's other build of torch for the $torch_build build"
      "$HYPERPOD_VENV/bin/python" -m pip uninstall -q -y torch
    fi
    echo "==> pip install -e .[$extras] into $HYPERPOD_VENV (builds the labextension; a few minutes on a fresh machine)"
    # torch: the build chosen above (on Linux PyPI's plain `torch` is the CUDA build, ~2.7 GB of
    # NVIDIA wheels); kubernetes below 37.0.2 (its newer release conflicts with botocore and
    # makes pip backtrack for minutes).
    local log="$HYPERPOD_VENV/pip-install.log"
    local status=0
    "$HYPERPOD_VENV/bin/python" -m pip install --disable-pip-version-check \
      -e ".[$extras]" "${torch_args[@]}" "kubernetes<37.0.2" \
      > >(tee "$log" | grep --line-buffered -E '^ *(Collecting|Installing|Building|Preparing|Successfully|ERROR)') 2>&1 \
      || status=$?
    wait  # for the last lines of the filter above
    if [ "$status" -ne 0 ]; then
      tail -n 25 "$log"
      echo "!! pip install failed (exit $status); the whole output is in $log"
      return 1
    fi
    echo "$digest $extras" >> "$stamp"
  fi
  export PATH="$HYPERPOD_VENV/bin:$PATH"
  export VIRTUAL_ENV="$HYPERPOD_VENV"
}
