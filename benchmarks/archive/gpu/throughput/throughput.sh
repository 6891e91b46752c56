#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh): the learner micro-benchmark (eager against captured),
# then short training runs under CUDA MPS whose steady-state throughput and phases are read back
# from their event files. Everything lands in $OUT (JSON per run, logs in one archive).
#
#   RUNS="flashsac:1024:3000 sac:1024:1500 flashsac:4096:1500" \
#     bash scripts/gpu/bootstrap.sh bash benchmarks/archive/gpu/throughput/throughput.sh
#
# LEARNER_BENCH=0 skips the micro-benchmark; RUNS="" skips the training runs.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
logs=$(mktemp -d)
status=0
python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
  >"$logs/assets.log" 2>&1 || { cat "$logs/assets.log"; exit 2; }
if [ "${LEARNER_BENCH:-1}" != 0 ]; then
  python3 -m soaklab bench learner --output "$out/learner.json" 2>&1 | tee "$logs/learner.log" || status=1
fi
if [ -n "${RUNS-flashsac:1024:3000}" ]; then
  python3 -m soaklab mps start >"$logs/mps.log" 2>&1 || { cat "$logs/mps.log"; exit 2; }
  for spec in ${RUNS-flashsac:1024:3000}; do
    IFS=: read -r algo envs iters <<<"$spec"
    name="${algo}_${envs}"
    dir="/tmp/measure-$name"
    rm -rf "$dir"
    python3 -m soaklab train --algo "$algo" --task g1_motion_tracking --sim mjwarp \
      training.cuda_process_sharing=mps "algo.num_envs=$envs" "algo.max_iterations=$iters" \
      algo.save_interval=100000 "training.log_dir=$dir" >"$logs/train_$name.log" 2>&1 || status=1
    tail -2 "$logs/train_$name.log"
    python3 scripts/gpu/gpu_phases.py "$dir" --out "$out/phases_$name.json" --steady-from $((iters / 3)) \
      --source "soaklab train --algo $algo --sim mjwarp algo.num_envs=$envs (benchmarks/archive/gpu/throughput/throughput.sh)" \
      >>"$logs/train_$name.log" 2>&1 || status=1
    cp "$dir/run_summary.json" "$logs/run_summary_$name.json" 2>/dev/null
  done
  python3 -m soaklab mps stop >>"$logs/mps.log" 2>&1
fi
tar -C "$logs" -czf "$out/throughput-logs.tgz" .
exit $status
