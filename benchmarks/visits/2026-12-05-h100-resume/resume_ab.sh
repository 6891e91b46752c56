#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, from a copy of the checkout): resumed GPU runs judged
# by the learning A/B (docs/runtime.md, "Resuming a run"), and what a checkpoint costs at 1024 envs.
#
#   OUT=/root/resume-out bash scripts/gpu/bootstrap.sh bash benchmarks/visits/2026-12-05-h100-resume/resume_ab.sh
#
# 1. the mujoco_warp kernels compiled once (scripts/gpu/warmup.py), the CUDA MPS daemon started,
#    the kernel cache packed into $OUT at once;
# 2. side by side, in two copies of the checkout:
#    - `record`: `soaklab record update gpu-learning`, the three seeds unbroken with today's code;
#    - `resumed`: the same three seeds with a resumable checkpoint every SAVE_INTERVAL (default 1000)
#      iterations (`record_overrides`), each trainer SIGKILLed at iteration KILL_AT (default 2500,
#      SOAKLAB_FAULT=kill_learner@KILL_AT) and the same DAG target run again, which resumes each
#      run from its checkpoint at 2000; then `snakemake reproduce` of gpu-learning there, against
#      the record just made: the A/B of a kill and resume against the unbroken runs;
# 3. the cost: one run alone on the GPU (seed 1, a checkpoint every COST_INTERVAL = 500 iterations,
#    COST_ITERATIONS = 3000), read by benchmarks/visits/2026-12-05-h100-resume/checkpoint_cost.py.
# Each stage packs its evidence into $OUT as it ends (resume.tgz), so what finished comes home even
# if a later stage does not. Start it detached and collect $OUT with calls that follow each other.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
echo $$ >/root/resume.pid
here=$(pwd)
work=/root/resume-work
kill_at=${KILL_AT:-2500}
stage() { echo "== $(date -u +%T) $*"; }
smk=(--cores 16 --scheduler greedy --configfile "$work/assets.yaml")
rm -rf "$work" && mkdir -p "$work/pack"
printf 'assets:\n  source: %s\n' "$here/resources/assets/cache/mjlab-1.6.0-py3-none-any.whl" >"$work/assets.yaml"
printf 'record_overrides:\n  algo.save_interval: %s\n' "${SAVE_INTERVAL:-1000}" >"$work/checkpoints.yaml"
pack() { cp "$work"/*.log "$work/pack/" 2>/dev/null; tar -C "$work/pack" -czf "$out/resume.tgz" . && stage "packed resume.tgz"; }

stage "warm-up: compile mujoco_warp's kernels, time the raw ceiling"
python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl >"$work/assets.log" 2>&1 \
  || { cat "$work/assets.log"; exit 2; }
python3 scripts/gpu/warmup.py --worlds 1024 --out "$work/pack/ceiling.json" >"$work/warmup.log" 2>&1 || tail -5 "$work/warmup.log"
python3 -m soaklab mps start >"$work/mps.log" 2>&1 || { cat "$work/mps.log"; exit 2; }
if [ -d ~/.cache/warp ]; then
  tar -C ~/.cache -czf - warp | split -b 15M -d - "$out/warpcache.tgz.part." && stage "packed the kernel cache"
fi
for side in record resumed; do
  mkdir -p "$work/$side" && cp -a "$here/." "$work/$side/" && rm -rf "$work/$side/results/rec-"* "$work/$side/.device"
done

stage "the record unbroken, and the same seeds killed at iteration $kill_at, side by side"
runs=(results/rec-gpu-learning-seed{1,2,3}/validation.json)
(cd "$work/record" && python3 -m soaklab record update gpu-learning --cores 16 -- --scheduler greedy \
   --configfile "$work/assets.yaml" >"$work/record.log" 2>&1; echo "record update: exit $?" >>"$work/record.log") &
(cd "$work/resumed" && SOAKLAB_FAULT="kill_learner@$kill_at" python3 -m snakemake "${runs[@]}" "${smk[@]}" \
   "$work/checkpoints.yaml" >"$work/resumed-killed.log" 2>&1; echo "killed: exit $?" >>"$work/resumed-killed.log"
 stage "resumed: the killed runs, run again"
 python3 -m snakemake "${runs[@]}" "${smk[@]}" "$work/checkpoints.yaml" >"$work/resumed.log" 2>&1
 echo "resumed: exit $?" >>"$work/resumed.log") &
wait
tail -2 "$work/record.log" "$work/resumed-killed.log" "$work/resumed.log"
rm -rf "$work/resumed/records/gpu-learning" && cp -a "$work/record/records/gpu-learning" "$work/resumed/records/"
stage "the A/B: the resumed seeds against the record"
(cd "$work/resumed" && python3 -m snakemake reproduce --config reproduce=gpu-learning "${smk[@]}" \
   "$work/checkpoints.yaml" >"$work/reproduce-resumed.log" 2>&1; echo "reproduce resumed: exit $?")
cp -a "$work/record/records/gpu-learning" "$work/pack/record"
cp -a "$work/resumed/results/reproduce" "$work/pack/reproduce" 2>/dev/null
for s in 1 2 3; do
  run=$work/resumed/results/rec-gpu-learning-seed$s
  mkdir -p "$work/pack/resumed/seed$s"
  cp "$run/soak.json" "$run/train/run_summary.json" "$run/train/segments.json" "$work/pack/resumed/seed$s/" 2>/dev/null
done
cp -a "$work/resumed/logs" "$work/pack/resumed/logs" 2>/dev/null
pack

stage "the cost: one run alone, a checkpoint every ${COST_INTERVAL:-500} iterations"
cost=$work/cost-run
(cd "$work/record" && python3 -m soaklab train --algo flashsac --task g1_motion_tracking --sim mjwarp \
   --skip-post-training training.cuda_process_sharing=mps training.mps_learner_thread_percentage=50 \
   algo.num_envs=1024 "algo.max_iterations=${COST_ITERATIONS:-3000}" "algo.save_interval=${COST_INTERVAL:-500}" \
   "training.log_dir=$cost" >"$work/cost-train.log" 2>&1; echo "cost run: exit $?")
python3 benchmarks/visits/2026-12-05-h100-resume/checkpoint_cost.py "$cost" --steady-from 1000 --out "$work/pack/checkpoint-cost.json" \
  --source "one FlashSAC G1 run alone on one $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) under MPS, 1024 envs, MJWarp (benchmarks/visits/2026-12-05-h100-resume/resume_ab.sh)" \
  >"$work/cost.log" 2>&1; cat "$work/cost.log"
cp "$cost/run_summary.json" "$work/pack/cost-run_summary.json" 2>/dev/null
pack

python3 -m soaklab mps stop >>"$work/mps.log" 2>&1
stage "done"
rm -f /root/resume.pid
