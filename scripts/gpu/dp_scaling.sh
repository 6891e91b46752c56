#!/usr/bin/env bash
# On nvidia-h200-xN (through bootstrap.sh, wheels staged with --with-snakemake): data-parallel scaling
# at N GPUs (argument; default 2). The N-GPU NCCL test of the agents (two ranks), the all-reduce time
# of one update at N GPUs (scripts/gpu/gpu_allreduce.py), then config/gpu-xN.yaml through the DAG (the
# N-rank FlashSAC G1 MJWarp soak, then the same run on one GPU), each read back by
# scripts/gpu/gpu_phases.py, and the scaling of the two by scripts/gpu/gpu_dp_scaling.py. Everything
# but checkpoints and event files comes back packed.
#
#   OUT=/root/dp-out setsid nohup bash scripts/gpu/bootstrap.sh bash scripts/gpu/dp_scaling.sh 4 ... &
#
# NCCL's transport follows the environment (NCCL_P2P_DISABLE=0 NCCL_SHM_DISABLE=0 lets it use NVLink);
# unset, the runtime's defaults hold: TCP over loopback. The manifest and the JSON record which.
# Run it from a copy of the checkout: a later device call re-syncs the checkout under a running job.
set -uo pipefail
gpus=${1:-2}
config=config/gpu-x$gpus.yaml
[ -f "$config" ] || { echo "dp_scaling: no $config" >&2; exit 2; }
out=${OUT:-/tmp/soaklab-out}
status=0
env_note="NCCL_P2P_DISABLE=${NCCL_P2P_DISABLE:-default} NCCL_SHM_DISABLE=${NCCL_SHM_DISABLE:-default}"
nvidia-smi --query-gpu=index,name,uuid --format=csv >"$out/gpus.csv" 2>&1
nvidia-smi topo -m >"$out/topo.txt" 2>&1
if [ "${NCCL_TEST:-1}" = 1 ]; then
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/rl/test_dp.py >"$out/nccl_test.log" 2>&1 || status=1
  tail -2 "$out/nccl_test.log"
fi
python3 scripts/gpu/gpu_allreduce.py --world "$gpus" --out "$out/allreduce.json" || status=1
if [ -f results/assets/manifest.json ] && [ -d resources/assets/g1 ]; then touch results/assets/manifest.json; fi
python3 -m snakemake soak --cores 1 --configfile "$config" >"$out/snakemake.log" 2>&1 || status=1
tail -3 "$out/snakemake.log"
for run in "gpu-x$gpus" gpu-x1; do
  python3 scripts/gpu/gpu_phases.py "results/$run/train" --out "$out/phases-$run.json" --steady-from 2000 \
    --source "$config run $run on nvidia-h200-x$gpus (bash scripts/gpu/bootstrap.sh bash scripts/gpu/dp_scaling.sh $gpus; $env_note)" \
    >"$out/phases-$run.log" 2>&1 || status=1
done
python3 scripts/gpu/gpu_dp_scaling.py "$out/phases-gpu-x$gpus.json" "$out/phases-gpu-x1.json" \
  --allreduce "$out/allreduce.json" --machine "nvidia-h200-x$gpus ($gpus x NVIDIA H200)" --out "$out/scaling.json" \
  || status=1
tar -czf "$out/dp-evidence.tgz" --exclude='*.pt' --exclude='events.out.tfevents.*' --exclude='metrics.csv' \
  "results/gpu-x$gpus" results/gpu-x1 "logs/gpu-x$gpus" logs/gpu-x1 "benchmarks/rules/gpu-x$gpus" \
  benchmarks/rules/gpu-x1 "$out"/*.log "$out"/gpus.csv "$out"/topo.txt 2>/dev/null
rm -f "$out"/nccl_test.log "$out"/snakemake.log "$out"/phases-*.log "$out"/gpus.csv "$out"/topo.txt  # packed above
echo "dp_scaling: $gpus GPUs, exit $status"
exit $status
