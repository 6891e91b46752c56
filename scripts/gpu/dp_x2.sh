#!/usr/bin/env bash
# On nvidia-h200-x2 (through bootstrap.sh, wheels staged with --with-snakemake): the two-GPU NCCL test
# of the agents, then config/gpu-x2.yaml through the DAG (the two-rank FlashSAC G1 MJWarp soak, then
# the same run on one GPU), each read back by benchmarks/gpu_phases.py, and the scaling of the two
# by benchmarks/gpu_dp_scaling.py. Everything but checkpoints and event files comes back packed.
#
#   OUT=/root/dp-out setsid nohup bash scripts/gpu/bootstrap.sh bash scripts/gpu/dp_x2.sh ... &
#
# NCCL's transport follows the environment (NCCL_P2P_DISABLE=0 NCCL_SHM_DISABLE=0 lets it use NVLink);
# unset, the runtime's defaults hold: TCP over loopback. The manifest and the JSON record which.
# Run it from a copy of the checkout: a later device call re-syncs the checkout under a running job.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
status=0
nvidia-smi --query-gpu=index,name,uuid --format=csv >"$out/gpus.csv" 2>&1
if [ "${NCCL_TEST:-1}" = 1 ]; then
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/rl/test_dp.py >"$out/nccl_test.log" 2>&1 || status=1
  tail -2 "$out/nccl_test.log"
fi
if [ -f results/assets/manifest.json ] && [ -d resources/assets/g1 ]; then touch results/assets/manifest.json; fi
python3 -m snakemake soak --cores 1 --configfile config/gpu-x2.yaml >"$out/snakemake.log" 2>&1 || status=1
tail -3 "$out/snakemake.log"
for run in gpu-x2 gpu-x1; do
  python3 benchmarks/gpu_phases.py "results/$run/train" --out "$out/phases-$run.json" --steady-from 2000 \
    --source "config/gpu-x2.yaml run $run on nvidia-h200-x2 (bash scripts/gpu/bootstrap.sh bash scripts/gpu/dp_x2.sh; NCCL_P2P_DISABLE=${NCCL_P2P_DISABLE:-default} NCCL_SHM_DISABLE=${NCCL_SHM_DISABLE:-default})" \
    >"$out/phases-$run.log" 2>&1 || status=1
done
python3 benchmarks/gpu_dp_scaling.py "$out/phases-gpu-x2.json" "$out/phases-gpu-x1.json" --out "$out/scaling.json" \
  || status=1
tar -czf "$out/dp-evidence.tgz" --exclude='*.pt' --exclude='events.out.tfevents.*' --exclude='metrics.csv' \
  results/gpu-x2 results/gpu-x1 logs/gpu-x2 logs/gpu-x1 benchmarks/rules/gpu-x2 benchmarks/rules/gpu-x1 \
  "$out"/*.log "$out"/gpus.csv 2>/dev/null
rm -f "$out"/nccl_test.log "$out"/snakemake.log "$out"/phases-*.log "$out"/gpus.csv  # packed above
echo "dp_x2: exit $status"
exit $status
