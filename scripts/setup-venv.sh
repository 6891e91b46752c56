#!/usr/bin/env bash
# Create the project virtualenv and install soaklab with its test extra.
# On a machine without an NVIDIA GPU, the CPU build of torch goes in first so
# that resolving `torch>=2.11` never pulls a multi-GB CUDA build.
set -euo pipefail
venv=${1:-.venv}
python=${PYTHON:-python3}

if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating $venv with $($python --version)"
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        echo "setup: NVIDIA GPU found; torch comes from the package index"
    else
        # torch 2.13.0 is the CPU build on these machines' local wheel store; elsewhere
        # the PyTorch CPU index serves the same version (SOAKLAB_TORCH_INDEX overrides).
        echo "setup: no NVIDIA GPU; installing the CPU build of torch first"
        if [ -n "${SOAKLAB_TORCH_INDEX:-}" ]; then
            "${pip[@]}" install "torch==2.13.0" --index-url "$SOAKLAB_TORCH_INDEX"
        else
            "${pip[@]}" install "torch==2.13.0"
        fi
    fi
fi
"${pip[@]}" install -e ".[test]"
echo "setup: done ($("$venv/bin/python" -c 'import torch, mujoco; print("torch", torch.__version__, "mujoco", mujoco.__version__)'))"
