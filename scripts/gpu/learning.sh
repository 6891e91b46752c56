#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh): the G1 tracking learning benchmark of record and its
# ablations, all at once, each `scripts/gpu/g1_learning.py run` for MINUTES of wall-clock time.
# The recipe run has GPU 0 to itself (under CUDA MPS when a daemon starts); the ablations share
# the last visible GPU (no MPS: their env-step axis is what compares them). Results land in
# $OUT/learning.tgz (one JSON and PNG per run, the trainers' logs); baselines.json is read from
# benchmarks/archive/gpu/learning/ (computed on the CPU: the task, not the learner, sets them).
#
#   MINUTES=16 bash scripts/gpu/bootstrap.sh bash scripts/gpu/learning.sh
#
# It outlasts one 10-minute command: start it detached and collect it (scripts/gpu/README.md).
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
minutes=${MINUTES:-16}
work=/root/learning
rm -rf "$work"
mkdir -p "$work"
cp benchmarks/archive/gpu/learning/baselines.json "$work/" 2>/dev/null

python3 -m soaklab assets pull --robot g1 >"$work/assets.log" 2>&1 || { cat "$work/assets.log"; exit 2; }
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
last=$((gpus - 1))

recipe_sharing=""
if CUDA_VISIBLE_DEVICES=0 python3 -m soaklab mps start >"$work/mps.log" 2>&1; then
  recipe_sharing="training.cuda_process_sharing=mps"
else
  echo "learning: no MPS daemon (see mps.log); the recipe run shares GPU 0 by time slicing" | tee -a "$work/mps.log"
fi

ENVS=${ENVS:-1024}
run() {  # run GPU LABEL ALGO OVERRIDES...
  local gpu=$1 label=$2 algo=$3
  shift 3
  CUDA_VISIBLE_DEVICES=$gpu nohup python3 scripts/gpu/g1_learning.py run --algo "$algo" --sim mjwarp \
    --minutes "$minutes" --label "$label" --out "$work" --keep-log "algo.num_envs=$ENVS" "$@" \
    >"$work/$label.bench.log" 2>&1 &
}

run 0 flashsac-recipe flashsac $recipe_sharing
if [ -n "$recipe_sharing" ]; then  # an MPS client that cannot start must not cost the run of record
  sleep 90
  if ! pgrep -f "label flashsac-recipe" >/dev/null; then
    echo "learning: the recipe run under MPS ended early; again without MPS" | tee -a "$work/mps.log"
    tail -5 "$work/flashsac-recipe.train.log" >>"$work/mps.log" 2>/dev/null
    run 0 flashsac-recipe flashsac
  fi
fi
if [ "${ABLATIONS:-1}" != 0 ]; then
  run "$last" ablate-motor-scale flashsac task.action_bounds=motor_scale
  run "$last" ablate-updates-1 flashsac algo.updates_per_step=1
  run "$last" ablate-n-step-1 flashsac algo.n_step=1
  run "$last" sac-recipe sac
fi
wait
CUDA_VISIBLE_DEVICES=0 python3 -m soaklab mps stop >>"$work/mps.log" 2>&1
python3 scripts/gpu/g1_learning.py table --out "$work" | tee "$work/ablation.md"
tar -C "$work" -czf "$out/learning.tgz" .
echo "learning: packed $(ls "$work" | wc -l) files into $out/learning.tgz"
