#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, from a copy of the checkout): the GPU records made with
# today's code, and the learning record's A/B against itself and against one changed setting.
#
#   OUT=/root/rec-out bash scripts/gpu/bootstrap.sh bash scripts/gpu/records.sh
#
# 1. the mujoco_warp kernels compiled once (scripts/gpu/warmup.py, whose JSON is the raw physics
#    ceiling of this visit), the CUDA MPS daemon started;
#    the kernel cache packed into $OUT at once, so a visit cut short still brings it home;
# 2. RECORDS (default gpu-soak-1024 gpu-throughput-4096), one after the other, alone on the GPU:
#    their cost is known (about 3.5 minutes each), so they go before the open-ended stage;
# 3. the learning record's nine runs side by side (its figures are read at fixed env-step counts):
#    `soaklab record update gpu-learning` in one copy of the checkout, the same three seeds in a
#    second copy (the A/B of today's code against itself) and in a third with ABLATION (default
#    algo.updates_per_step=1) as record_overrides; then `snakemake reproduce` in the second and third
#    against the new record. AB=0 runs the record's three seeds alone (no self, no ablation);
# 4. EVALUATE (default 1): a run of the learning record's config (seed 1; `record update` keeps only
#    the records, not the run dirs) trained alone under MPS, then evaluated from the clip's first
#    frame (`soaklab evaluate`, ONNX policy) on MJWarp (1024 episodes) and, sim-to-sim, on MuJoCo (64).
# Each stage packs its evidence into $OUT as it ends (throughput.tgz, learning.tgz), so what
# finished comes home even if a later stage does not. It outlasts one device command: start it
# detached and collect $OUT with calls that follow each other (scripts/gpu/README.md).
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
# Collecting calls wait on this pid (`kill -0`), never on `pgrep -f records.sh`, which matches the
# waiting command's own text and so waits out its whole limit (it did, 2026-12-01).
echo $$ >/root/records.pid
here=$(pwd)
work=/root/records-work
stage() { echo "== $(date -u +%T) $*"; }
smk=(--cores 16 --scheduler greedy --configfile "$work/assets.yaml")
rm -rf "$work" && mkdir -p "$work"
printf 'assets:\n  source: %s\n' "$here/resources/assets/cache/mjlab-1.6.0-py3-none-any.whl" >"$work/assets.yaml"
printf 'record_overrides:\n  %s\n' "${ABLATION:-algo.updates_per_step: 1}" >"$work/ablation.yaml"

stage "warm-up: compile mujoco_warp's kernels, time the raw ceiling"
python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl >"$work/assets.log" 2>&1 \
  || { cat "$work/assets.log"; exit 2; }
python3 scripts/gpu/warmup.py --worlds 1024,4096 --out "$out/ceiling.json" >"$work/warmup.log" 2>&1 || tail -5 "$work/warmup.log"
python3 -m soaklab mps start >"$work/mps.log" 2>&1 || { cat "$work/mps.log"; exit 2; }
if [ -d ~/.cache/warp ]; then  # bootstrap.sh packs it again at the end, over these parts
  tar -C ~/.cache -czf - warp | split -b 15M -d - "$out/warpcache.tgz.part." && stage "packed the kernel cache"
fi

for side in record self ablation; do
  mkdir -p "$work/$side" && cp -a "$here/." "$work/$side/" && rm -rf "$work/$side/results/rec-"* "$work/$side/.device"
done

for name in ${RECORDS-gpu-soak-1024 gpu-throughput-4096}; do
  stage "record $name"
  (cd "$work/record" && python3 -m soaklab record update "$name" --cores 16 -- --scheduler greedy \
     --configfile "$work/assets.yaml" >"$work/record-$name.log" 2>&1; echo "record update $name: exit $?")
  tail -3 "$work/record-$name.log"
  mkdir -p "$work/pack-throughput"
  cp -a "$work/record/records/$name" "$work/pack-throughput/" 2>/dev/null
  cp "$work/record-$name.log" "$work/pack-throughput/" 2>/dev/null
  tar -C "$work/pack-throughput" -czf "$out/throughput.tgz" . && stage "packed throughput.tgz"
done

if [ "${LEARNING:-1}" != 0 ]; then
  stage "learning: record, self and ablation seeds side by side"
  (cd "$work/record" && python3 -m soaklab record update gpu-learning --cores 16 -- --scheduler greedy \
     --configfile "$work/assets.yaml" >"$work/learning-record.log" 2>&1; echo "record update: exit $?" >>"$work/learning-record.log") &
  runs=(results/rec-gpu-learning-seed{1,2,3}/validation.json)
  sides=()
  if [ "${AB:-1}" != 0 ]; then
    sides=(self ablation)
    (cd "$work/self" && python3 -m snakemake "${runs[@]}" "${smk[@]}" >"$work/learning-self.log" 2>&1) &
    (cd "$work/ablation" && python3 -m snakemake "${runs[@]}" "${smk[@]}" "$work/ablation.yaml" \
       >"$work/learning-ablation.log" 2>&1) &
  fi
  wait
  tail -4 "$work/learning-record.log"
  for side in "${sides[@]}"; do
    rm -rf "$work/$side/records/gpu-learning" && cp -a "$work/record/records/gpu-learning" "$work/$side/records/"
  done
  if [ ${#sides[@]} -gt 0 ]; then
    stage "learning: the A/B comparisons"
    (cd "$work/self" && python3 -m snakemake reproduce --config reproduce=gpu-learning "${smk[@]}" \
       >"$work/reproduce-self.log" 2>&1; echo "reproduce self: exit $?")
    (cd "$work/ablation" && python3 -m snakemake reproduce --config reproduce=gpu-learning "${smk[@]}" \
       "$work/ablation.yaml" >"$work/reproduce-ablation.log" 2>&1; echo "reproduce ablation: exit $?")
  fi
  for side in "${sides[@]}"; do
    mkdir -p "$work/pack/$side" && cp -a "$work/$side/results/reproduce" "$work/pack/$side/" 2>/dev/null
    cp -a "$work/$side/logs" "$work/pack/$side/logs" 2>/dev/null
  done
  mkdir -p "$work/pack" && cp -a "$work/record/records/gpu-learning" "$work/pack/record" 2>/dev/null
  cp "$work"/*.log "$work/pack/" 2>/dev/null
  tar -C "$work/pack" -czf "$out/learning.tgz" --exclude='*.pt' --exclude='events.out.tfevents.*' . \
    && stage "packed learning.tgz"
fi

if [ "${EVALUATE:-1}" != 0 ]; then
  run=$work/eval-run
  mkdir -p "$work/eval"
  stage "evaluate: train the learning record's run (seed 1) alone"
  (cd "$work/record" && python3 -m soaklab train --algo flashsac --task g1_motion_tracking --sim mjwarp \
     --skip-post-training training.cuda_process_sharing=mps training.mps_learner_thread_percentage=50 \
     algo.num_envs=1024 algo.max_iterations=4400 algo.save_interval=4400 "training.log_dir=$run" \
     >"$work/eval/train.log" 2>&1; echo "train: exit $?")
  cp "$run/run_summary.json" "$work/eval/" 2>/dev/null
  for sim in mjwarp mujoco; do
    stage "evaluate the record's seed 1 on $sim"
    python3 -m soaklab evaluate "$run" --sim "$sim" --out "$work/eval/evaluation-$sim.json" \
      --html "$work/eval/evaluation-$sim.html" >"$work/eval/evaluate-$sim.log" 2>&1; echo "evaluate $sim: exit $?"
    tail -1 "$work/eval/evaluate-$sim.log"
    tar -C "$work/eval" -czf "$out/evaluate.tgz" . && stage "packed evaluate.tgz"
  done
fi

python3 -m soaklab mps stop >>"$work/mps.log" 2>&1
stage "done"
rm -f /root/records.pid
