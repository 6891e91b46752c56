#!/usr/bin/env bash
# On the GPU machine, through scripts/gpu/bootstrap.sh, from a copy of the checkout (detached; it
# outlasts one device command): issue 50's crawl_slope recipe, two seeds side by side, in one hold.
#
#   OUT=/root/visit-out bash scripts/gpu/bootstrap.sh bash benchmarks/visits/2026-12-06-crawl/visit.sh
#
# 1. warm-up: mujoco_warp's kernels compiled once (so the two runs do not compile side by side), the
#    CUDA MPS daemon started;
# 2. SEEDS (default 11 12: seeds no benchmark had used) trained side by side on the one GPU, the
#    motion library with RECIPE's overrides, each ended by its own wall-clock budget of MINUTES
#    (start-up and torch.compile counted) with its final checkpoint. Side by side each run has less of
#    the GPU than alone, so what is met here holds for a run alone;
# 3. each final checkpoint judged from each clip's first frame on MJWarp (1024 episodes per clip)
#    and, sim-to-sim, on MuJoCo (64); the first seed's checkpoints nearest TABLE_MINUTES of its
#    training judged on MJWarp with TABLE_EPISODES each (the "how long to train" table).
# Everything done so far is packed into $OUT/visit.tgz after each stage.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
echo $$ >/root/visit.pid
work=/root/crawl-work
logs=$work/evidence
rm -rf "$work" && mkdir -p "$logs"
stage() { echo "== $(date -u +%T) $*" | tee -a "$logs/stages.log"; }
pack() { tar -C "$logs" -czf "$out/visit.tgz" .; }
finish() { pack; rm -f /root/visit.pid; }
trap finish EXIT

seeds=${SEEDS:-11 12}
minutes=${MINUTES:-16}
table_minutes=${TABLE_MINUTES:-4 8 12}
table_episodes=${TABLE_EPISODES:-256}
read -r -a recipe <<<"${RECIPE:-env.motion=[largebox,crawl_slope] env.motion_weights=[1,3] task.sampler_settings.first_frame_ratio=0.2 algo.save_interval=4000}"
sharing=(training.cuda_process_sharing=mps training.mps_learner_thread_percentage=50 algo.num_envs=1024)
printf '%s\n' "seeds: $seeds" "minutes: $minutes" "recipe: ${recipe[*]}" "sharing: ${sharing[*]}" >"$logs/plan.txt"

python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
  >"$logs/assets.log" 2>&1 || { cat "$logs/assets.log"; exit 2; }
stage "warm-up: compile mujoco_warp's kernels, time the raw ceiling"
python3 scripts/gpu/warmup.py --worlds 1024 --out "$logs/ceiling.json" >"$logs/warmup.log" 2>&1 || tail -5 "$logs/warmup.log"
python3 -m soaklab mps start >"$logs/mps.log" 2>&1 || { cat "$logs/mps.log"; exit 2; }

stage "train seeds $seeds side by side, $minutes minutes each"
for seed in $seeds; do
  label=seed$seed
  date +%s >"$logs/$label.started"
  (python3 scripts/gpu/g1_learning.py run --algo flashsac --sim mjwarp --minutes "$minutes" --label "$label" \
     --out "$logs" --keep-log --keep-run "$work/run-$label" "${sharing[@]}" "${recipe[@]}" \
     algo.seed="$seed" env.seed="$seed" >"$logs/$label.bench.log" 2>&1
   echo "train $label: exit $?"; tail -1 "$logs/$label.bench.log"
   cp "$work/run-$label/run_summary.json" "$logs/$label.run_summary.json" 2>/dev/null
   cp "$work/run-$label/run_config.json" "$logs/$label.run_config.json" 2>/dev/null) &
done
wait
python3 -m soaklab mps stop >>"$logs/mps.log" 2>&1
stage "trained"
pack

evaluate() {  # label, sim, name, extra arguments
  local label=$1 sim=$2 name=$3; shift 3
  python3 -m soaklab evaluate "$work/run-$label" --sim "$sim" --out "$logs/$name.json" "$@" \
    >"$logs/$name.log" 2>&1
  echo "evaluate $name: exit $?"; grep -h "^evaluate:" "$logs/$name.log"
}
nearest() {  # run dir, start epoch, minutes: the policy checkpoint written nearest that minute of the run
  python3 - "$@" <<'PY'
import sys
from pathlib import Path
run, start, minutes = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
found = [p for p in (run / "checkpoints").glob("model_*.pt") if p.stem.removeprefix("model_").isdigit()]
best = min(found, key=lambda p: abs(p.stat().st_mtime - start - 60 * minutes))
print(best, round((best.stat().st_mtime - start) / 60, 2))
PY
}
stage "evaluate: final checkpoints on mjwarp and mujoco, the first seed's checkpoints at $table_minutes minutes"
export OMP_NUM_THREADS=2
for seed in $seeds; do
  for sim in mjwarp mujoco; do evaluate "seed$seed" "$sim" "seed$seed.evaluation-$sim" & done
done
first=${seeds%% *}
for m in $table_minutes; do
  read -r ckpt at < <(nearest "$work/run-seed$first" "$(cat "$logs/seed$first.started")" "$m")
  [ -n "${ckpt:-}" ] || continue
  echo "$m $at $(basename "$ckpt")" >>"$logs/table-checkpoints.txt"
  evaluate "seed$first" mjwarp "seed$first.minute-$m" --checkpoint "$ckpt" --episodes "$table_episodes" &
done
wait
stage "done"
