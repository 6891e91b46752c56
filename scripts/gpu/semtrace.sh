#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh): whose semaphore is "There appear to be 1 leaked semaphore
# objects to clean up at shutdown" at the end of every GPU training run (issue 28)? Runs the canonical
# run (FlashSAC, G1, MJWarp, 1024 envs) for ITERATIONS iterations with scripts/gpu/semtrace on
# PYTHONPATH (every process logs each semaphore it registers, with the stack), once with the task
# terms compiled and once eager, and prints each leaked name's stack (semtrace/leaks.py).
#
#   OUT=/root/sem-out bash scripts/gpu/bootstrap.sh bash scripts/gpu/semtrace.sh   # about 3 minutes
#
# COMPILE (default "1 0") picks the runs: "1" alone is the one that leaked (2026-12-02: tqdm's
# multiprocessing lock, made in the collector by torch.compile; soaklab.host.lifetime.leave says why).
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
iterations=${ITERATIONS:-300}
python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
  >"$out/assets.log" 2>&1 || { cat "$out/assets.log"; exit 2; }
for compile in ${COMPILE:-1 0}; do
  log="$out/semtrace-compile$compile.log"
  SOAKLAB_TORCH_COMPILE=$compile PYTHONPATH="$(pwd)/scripts/gpu/semtrace:$PYTHONPATH" python3 -m soaklab train \
    --algo flashsac --task g1_motion_tracking --sim mjwarp algo.num_envs=1024 "algo.max_iterations=$iterations" \
    "algo.save_interval=$iterations" "training.log_dir=/root/semtrace-run$compile" >"$log" 2>&1
  echo "== compile=$compile: train exit $?; $(grep -c 'leaked semaphore' "$log") tracker warning(s)"
  python3 scripts/gpu/semtrace/leaks.py "$log"
done
