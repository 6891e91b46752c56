#!/usr/bin/env bash
# On the GPU machine, through bootstrap.sh: the phase-local backend probe (MuJoCo on the host's
# cores and MJWarp on the GPU, each with its raw physics ceiling) at 1024, 4096 and 8192 envs.
#   bash scripts/gpu/bootstrap.sh bash benchmarks/archive/gpu/probe.sh
# SIZES="8192" runs one size; BACKENDS=mjwarp skips MuJoCo (the slow part on 16 cores).
set -euo pipefail
out=${OUT:-/tmp/soaklab-out}
wheel=$(ls resources/assets/cache/mjlab-*.whl)
python3 -m soaklab assets pull --robot g1 --source "$wheel"
for n in ${SIZES:-1024 4096 8192}; do
  python3 -m soaklab bench backend --backends "${BACKENDS:-mujoco,mjwarp}" --num-envs "$n" --warmup 20 --iters 100 \
    --output "$out/backend_$n.json"
done
