#!/usr/bin/env bash
# Regenerate requirements/cpu.lock: the CPU set-up's every package, pinned with its hashes, from
# pyproject.toml (with the test, warp and wandb extras) and requirements/cpu.in (the CPU build of torch). Run it on a
# Linux x86_64 machine with CPython 3.11 (the lock's platform) whose pip can see torch 2.13.0+cpu
# (add --extra-index-url https://download.pytorch.org/whl/cpu elsewhere).
set -euo pipefail
venv=${1:-.venv}
"$venv/bin/python" -m pip install --quiet pip-tools
"$venv/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --extra test --extra warp --extra wandb --strip-extras \
    --no-emit-index-url --no-emit-find-links --output-file requirements/cpu.lock pyproject.toml requirements/cpu.in "${@:2}"
echo "lock: wrote requirements/cpu.lock ($(grep -c '^[a-z]' requirements/cpu.lock) packages)"
