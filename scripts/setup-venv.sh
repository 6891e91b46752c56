#!/usr/bin/env bash
# Create the project virtualenv and install soaklab with its test tools.
#
# Without an NVIDIA GPU (CI, laptops): the pinned CPU stack, every wheel checked against its hash
# (requirements/cpu.lock, regenerate: bash scripts/lock.sh). Its torch is the CPU build,
# 2.13.0+cpu: from the pip configuration's own indexes where they have it (this workplace's local
# wheel store does), else from the PyTorch CPU wheel index (SOAKLAB_TORCH_INDEX overrides it).
# With an NVIDIA GPU: torch and the rest from the package index (the lock is the CPU set-up).
set -euo pipefail
venv=${1:-.venv}
python=${PYTHON:-python3}
torch_cpu="torch==2.13.0+cpu"

if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating $venv with $($python --version)"
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "setup: NVIDIA GPU found; torch and the rest from the package index (unlocked)"
    "${pip[@]}" install -e ".[test,warp,wandb]"
else
    index=()
    if [ -n "${SOAKLAB_TORCH_INDEX:-}" ]; then
        index=(--extra-index-url "$SOAKLAB_TORCH_INDEX")
    elif ! "${pip[@]}" install --dry-run --no-deps --quiet "$torch_cpu" >/dev/null 2>&1; then
        index=(--extra-index-url "https://download.pytorch.org/whl/cpu")
    fi
    # pip byte-compiles at install (48 of the set-up's 153 s on two cores), and it must: with
    # PYTHONDONTWRITEBYTECODE set (CI sets it) nothing compiled on import is kept (pytest 1011 -> 1574 s).
    echo "setup: no NVIDIA GPU; the locked CPU stack (requirements/cpu.lock)${index:+ with ${index[1]}}"
    "${pip[@]}" install --require-hashes -r requirements/cpu.lock "${index[@]}"
    "${pip[@]}" install --no-deps -e .
fi
echo "setup: done ($("$venv/bin/python" -c 'import torch, mujoco; print("torch", torch.__version__, "mujoco", mujoco.__version__)'))"
