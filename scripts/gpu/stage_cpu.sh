#!/usr/bin/env bash
# Stage the CPU set-up for the GPU machine's host CPU (an Intel Xeon with AVX-512, 16 cores), where
# the CPU records are reproduced with no GPU (cpu_reproduce.sh). That machine has Python 3.12 and a
# CUDA torch 2.11, and no package index; a cpu record's bits are torch 2.13.0+cpu's and MuJoCo
# 4.0.0's, whose locked wheels here are for CPython 3.11. So this packs this machine's CPython 3.11
# (pyenv's build, standard library only; it needs glibc >= 2.35) and the locked wheels a reproduction
# imports (requirements/cpu.lock less warp, ONNX, ffmpeg, the linters and the test tools) into one tar,
# split in 48 MiB parts: each fits one transfer beside the checkout (about 13 MiB).
#
#   bash scripts/gpu/stage_cpu.sh      # writes .device/cpuparts/cpu.tar.part.* and SUMS (git-ignored)
set -euo pipefail
cd "$(dirname "$0")/../.."
python_home=${PYTHON_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v python3.11 || true)")")")}
[ -x "$python_home/bin/python3.11" ] || python_home=$(python3.11 -c 'import sys; print(sys.base_prefix)')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/wheels" .device/cpuparts
.venv/bin/python -m pip download --quiet --no-deps --require-hashes -r requirements/cpu.lock -d "$work/all"
for wheel in "$work"/all/*.whl; do
  case $(basename "$wheel") in
    warp_lang*|mujoco_warp*|mujoco_studio*|imageio*|onnx*|pulp*|ruff*|black*|snakefmt*|shfmt*|glfw*|pyopengl*|PyOpenGL*|\
    pytest*|execnet*|iniconfig*|pluggy*|mypy_extensions*|pathspec*|pytokens*) ;;
    *) cp "$wheel" "$work/wheels/" ;;
  esac
done
base=$(dirname "$python_home")
version=$(basename "$python_home")
tar -C "$base" --exclude="$version/lib/python3.11/site-packages/*" --exclude="$version/lib/python3.11/test" \
    --exclude="$version/lib/python3.11/idlelib" --exclude="$version/lib/python3.11/tkinter" \
    --exclude="$version/lib/python3.11/turtledemo" --exclude='*/__pycache__' -czf "$work/py311.tar.gz" "$version"
echo "$python_home" > "$work/python_home"
rm -f .device/cpuparts/cpu.tar.part.*
tar -C "$work" -cf - python_home py311.tar.gz wheels | split -b 48M -d - .device/cpuparts/cpu.tar.part.
(cd .device/cpuparts && sha256sum cpu.tar.part.* > SUMS)
echo "stage_cpu: $(ls .device/cpuparts/cpu.tar.part.* | wc -l) parts, $(du -sh .device/cpuparts | cut -f1), CPython from $python_home"
