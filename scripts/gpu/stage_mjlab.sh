#!/usr/bin/env bash
# Here, before a GPU visit: the wheels mjlab's PPO needs beyond what the GPU machine has and what
# scripts/gpu/stage.sh stages, for `python3 scripts/gpu/mjlab_ppo.py` (issue 29's side-by-side).
# Writes .device/mjlab/ (git-ignored, under .device/); on the device, carry it in a call of its own
# and install with `python3 -m pip install --no-deps --no-index --target /root/site .device/mjlab/*.whl`.
# The list is mjlab 1.6.0's import closure for its tracking task and rsl-rl runner (resolved here for
# Python 3.12 on 2026-12-02) less torch, numpy, matplotlib, tensorboard and their dependencies
# (there already) and the wheels stage.sh brings. wandb is left out: its opentelemetry is not in the
# workplace's wheel store, and the benchmark stands an absent wandb in (scripts/gpu/mjlab_ppo.py).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
dest=.device/mjlab
rm -rf "$dest" && mkdir -p "$dest"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dest" rsl-rl-lib==5.4.2 tensordict pyvers cloudpickle importlib_metadata tyro docstring_parser \
  typeguard rich markdown-it-py mdurl Pygments prettytable wcwidth mediapy ImageIO ipython \
  ipython_pygments_lexers jedi parso pexpect ptyprocess prompt_toolkit stack-data executing asttokens \
  pure_eval traitlets matplotlib-inline decorator mjviser mujoco-studio glfw PyOpenGL trimesh viser \
  websockets msgspec zstandard orjson lazy-importer onnx onnx-ir onnxscript ml_dtypes tqdm
du -sh "$dest"
