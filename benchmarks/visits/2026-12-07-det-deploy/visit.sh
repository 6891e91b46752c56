#!/usr/bin/env bash
# One detached visit for issue 67's and issue 70's GPU points, from a copy of the checkout at
# /root/work with both pinned wheels in resources/assets/cache/ (scripts/gpu/README.md, step 4):
#
#   (setsid nohup bash benchmarks/visits/2026-12-07-det-deploy/visit.sh >/root/visit.log 2>&1 </dev/null &)
#
# 1. the deterministic mode's GPU test (64 worlds, 20 captured steps, two backends bit for bit:
#    soaklab's contact and constraint sorts on a GPU for the first time);
# 2. if it passes, the gpu-deterministic record made and reproduced on this machine, alone (its
#    throughput is a figure of record, so nothing else may share the GPU);
# 3. then side by side (bits only, no timings): determinism.sh bits (two runs, a killed and resumed
#    one, the default mode twice), determinism.sh soak (the DAG and `-R train_soak`), and
#    deploy_check.sh (a G1 library policy trained MINUTES, exported, judged from the file alone).
# Everything lands under /root/visit-out, one folder per step; /root/visit.done marks the end.
set -uo pipefail
cd /root/work
out=/root/visit-out
rm -rf "$out" /root/visit.done && mkdir -p "$out"
source scripts/gpu/visit_steps.sh  # log, step

log "the deterministic mode's GPU test"
step test python3 -m pytest -q -rs -p no:cacheprovider -m gpu tests/sim/test_mjwarp.py -k deterministic_mode
tail -5 "$out/test/console.log"
if grep -q "^1 passed" "$out/test/console.log"; then  # (this visit had " 1 passed": the record stage was skipped, then run by hand)
  log "the gpu-deterministic record, alone on the GPU"
  step record bash scripts/gpu/determinism.sh record
  tail -4 "$out/record/console.log"
fi
log "bits, soak and deploy_check side by side"
# Started 40 s apart: each pulls the G1 assets into the same checkout first.
step bits bash scripts/gpu/determinism.sh bits &
sleep 40
step soak bash scripts/gpu/determinism.sh soak &
sleep 40
MINUTES=${MINUTES:-5} step deploy bash scripts/gpu/deploy_check.sh &
wait
log "done"
touch /root/visit.done
