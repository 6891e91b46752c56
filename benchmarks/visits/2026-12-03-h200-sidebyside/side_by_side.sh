#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, both pinned wheels in resources/assets/cache/): issue 29's
# side-by-side with mjlab's PPO on the same G1 clip, one stage per device call so each fits one
# 10-minute command and its JSON comes straight back in $OUT:
#
#   STAGE=mjlab    MINUTES=6 bash scripts/gpu/bootstrap.sh bash benchmarks/visits/2026-12-03-h200-sidebyside/side_by_side.sh
#   STAGE=flashsac MINUTES=6 bash scripts/gpu/bootstrap.sh bash benchmarks/visits/2026-12-03-h200-sidebyside/side_by_side.sh
#
# mjlab: mjlab and the wheels scripts/gpu/stage_mjlab.sh staged (carried in a call of their own to
# /root/mjlab-wheels) installed into /root/site, then `scripts/gpu/mjlab_ppo.py` at ENVS (4096) envs for
# MINUTES of learning. flashsac: the recipe under MPS at ENVS envs for MINUTES of wall clock
# (`scripts/gpu/g1_learning.py run`, start-up included), its phases (`scripts/gpu/gpu_phases.py`), then
# the raw physics ceiling at 1024 worlds twice, at the env's own constraint rows (256 per world) and at
# 192, which separates the row count from the env's states. Both stages write `sbs-<stage>.tgz`
# (JSON, logs, event files). Here: `python benchmarks/visits/2026-12-03-h200-sidebyside/side_by_side.py` joins the two.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
stage=${STAGE:-}
minutes=${MINUTES:-6}
envs=${ENVS:-4096}
case $stage in mjlab | flashsac) ;; *) echo "STAGE: '$stage': expected mjlab or flashsac" >&2; exit 2 ;; esac
work=/root/sbs-$stage
rm -rf "$work" && mkdir -p "$work"
pack() { tar -C "$work" --exclude='*.pt' --exclude='*.onnx' -czf "$out/sbs-$stage.tgz" .; }

python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
  >"$work/assets.log" 2>&1 || { cat "$work/assets.log"; exit 2; }

if [ "$stage" = mjlab ]; then
  ls /root/mjlab-wheels/*.whl >/dev/null 2>&1 || { echo "side_by_side: /root/mjlab-wheels is empty; carry .device/mjlab first" >&2; exit 2; }
  python3 -m pip install -q --no-index --no-deps --no-compile --target /root/site \
    resources/assets/cache/mjlab-1.6.0-py3-none-any.whl /root/mjlab-wheels/*.whl >"$work/pip.log" 2>&1 \
    || { cat "$work/pip.log"; exit 2; }
  # The clip's own time limit past the budget: SIGTERM ends learning after the iteration in flight.
  timeout -k 30 $(( ${minutes%.*} * 60 + 150 )) python3 scripts/gpu/mjlab_ppo.py --num-envs "$envs" \
    --minutes "$minutes" --log-dir "$work/mjlab-ppo" --out "$work/mjlab_ppo.json" >"$work/mjlab_ppo.log" 2>&1
  echo "mjlab_ppo: exit $?"; tail -3 "$work/mjlab_ppo.log"
else
  python3 -m soaklab mps start >"$work/mps.log" 2>&1 || { cat "$work/mps.log"; exit 2; }
  python3 scripts/gpu/g1_learning.py run --algo flashsac --sim mjwarp --minutes "$minutes" --label "flashsac-$envs" \
    --out "$work" --keep-log --keep-run "$work/run" training.cuda_process_sharing=mps \
    training.mps_learner_thread_percentage=50 "algo.num_envs=$envs" >"$work/flashsac.bench.log" 2>&1
  echo "flashsac: exit $?"; tail -1 "$work/flashsac.bench.log"
  python3 -m soaklab mps stop >>"$work/mps.log" 2>&1
  python3 scripts/gpu/gpu_phases.py "$work/run" --out "$work/flashsac-phases.json" \
    --source "issue 29's side-by-side, FlashSAC at $envs envs" >"$work/phases.log" 2>&1 || tail -3 "$work/phases.log"
  pack
  for njmax in 256 192; do
    python3 scripts/gpu/warmup.py --worlds 1024 --njmax $njmax --out "$work/ceiling-njmax$njmax.json" \
      >"$work/warmup-njmax$njmax.log" 2>&1 || tail -3 "$work/warmup-njmax$njmax.log"
    pack
  done
fi
pack
