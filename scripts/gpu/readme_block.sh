#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, wheels staged with --with-snakemake): the README's GPU
# block as a GPU user types it (scripts/run-readme.py --gpu: the gpu-short soak, the gpu-throughput-4096
# record reproduced, the soak's policy exported and evaluated, `soaklab mps stop`), then its evidence
# packed into $OUT/readme.tgz: the block's console, every result, log and rule benchmark it made
# (checkpoints and event files left out for size) and the soak's phase breakdown and reward curve,
# read here from its event file (scripts/gpu/gpu_phases.py).
#
#   OUT=/root/readme-out bash scripts/gpu/bootstrap.sh bash scripts/gpu/readme_block.sh [--skip LINE ...]
#
# Arguments go to run-readme.py: `--skip "$(grep -m1 '^snakemake reproduce' README.md)"` leaves out a
# line a visit already ran as written (it says so in the console), when device time is short.
#
# About 18 minutes (13 with the record line skipped): start it detached (setsid) and collect it with
# calls back to back, each waiting on /root/readme.done (scripts/gpu/README.md).
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
pack=/root/readme-pack
rm -f /root/readme.done
mkdir -p "$pack" "$out"
# The device keeps a checkout's ignored outputs between calls, so logs/ may hold an earlier visit's
# files (a 2026-12-06 visit found one): only what this run wrote is packed.
start=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$pack/gpu.csv" 2>&1
git rev-parse HEAD >"$pack/commit.txt" 2>/dev/null || true

python3 scripts/run-readme.py --gpu "$@" 2>&1 | tee "$pack/run-readme.log"
status=${PIPESTATUS[0]}

# Not part of the block: the figures docs/runtime.md quotes for the soak of record.
if [ -d results/gpu-short/train ]; then
  python3 scripts/gpu/gpu_phases.py results/gpu-short/train --out "$pack/phases.json" --steady-from 2000 \
    --curve-out "$pack/reward_curve.json" >"$pack/phases.log" 2>&1 || status=1
fi
tar -czf "$out/readme.tgz" --newer-mtime="@$start" --exclude='*.pt' --exclude='events.out.tfevents.*' --exclude='metrics.csv' \
  -C "$pack" . -C "$PWD" results logs benchmarks/rules 2>/dev/null
echo "readme_block: exit $status" | tee /root/readme.done
exit "$status"
