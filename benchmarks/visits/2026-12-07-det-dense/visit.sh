#!/usr/bin/env bash
# One detached visit for issue 67 with the deterministic mode's dense Jacobian (soaklab.sim.mjwarp
# DENSE_REASON), from a copy of the checkout at /root/work with both pinned wheels in
# resources/assets/cache/ (scripts/gpu/README.md, step 4):
#
#   (setsid nohup bash benchmarks/visits/2026-12-07-det-dense/visit.sh [STAGE...] >/root/visit.log 2>&1 </dev/null &)
#
# capture   scripts/gpu/det_capture.py at 1024 and 4096 worlds, both modes, the backend's own layout:
#           does the deterministic step capture now, repeat bit for bit, and at what step time;
# then, only if the deterministic step captured and repeated at 1024 worlds, the stages of
# scripts/gpu/determinism.sh given (default: bits soak record cost), one after the other, alone on
# the GPU; sparse: the sparse layout's deterministic step at 1024 worlds (eager) for comparison;
# one-block: det_capture.py's one-block contact Jacobian experiment; reproduce: the gpu-deterministic
# record reproduced (scripts/gpu/reproduce.sh; the next visit: `visit.sh reproduce soak one-block cost`).
# Everything lands under /root/visit-out, one folder per step; /root/visit.done marks the end.
set -uo pipefail
cd /root/work
out=/root/visit-out
mkdir -p "$out" && rm -f /root/visit.done
source scripts/gpu/visit_steps.sh  # log, step
stages=("$@"); [ ${#stages[@]} -gt 0 ] || stages=(capture bits soak record cost)
for stage in "${stages[@]}"; do
  case $stage in
  capture)
    log "det_capture: both modes, 1024 and 4096 worlds"
    step capture python3 scripts/gpu/det_capture.py --worlds 1024,4096 --jacobians auto \
      --modes deterministic,default --out "$out/capture/det_capture.json"
    grep '^{' "$out/capture/console.log"
    [ -s "$out/capture/det_capture.json" ] || { log "det_capture wrote no cases (console.log says why): the stages are skipped"; break; }
    if ! python3 - "$out/capture/det_capture.json" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
ok = any(c["worlds"] == 1024 and c["mode"] == "deterministic" and c.get("captured") and c.get("bitwise")
         for c in cases)
sys.exit(0 if ok else 1)
PY
    then log "the deterministic step did not capture and repeat at 1024 worlds: the stages are skipped"; break; fi
    ;;
  one-block)  # the experiment on the deterministic step's cost (det_capture.py one_block_contact_jac)
    log "det_capture: the deterministic step with the contact Jacobian in one dof block"
    step one-block python3 scripts/gpu/det_capture.py --worlds 1024,4096 --jacobians auto --modes deterministic \
      --contact-jac one-block --out "$out/one-block/det_capture.json"
    grep '^{' "$out/one-block/console.log"
    ;;
  reproduce)  # the gpu-deterministic record, reproduced on a later visit and kept if it passes
    log "reproduce gpu-deterministic"
    REPRODUCE=gpu-deterministic step reproduce bash scripts/gpu/reproduce.sh
    tail -8 "$out/reproduce/console.log" | grep -v "^bootstrap"
    ;;
  sparse)
    log "det_capture: the sparse layout's deterministic step at 1024 worlds"
    step sparse python3 scripts/gpu/det_capture.py --worlds 1024 --jacobians sparse --modes deterministic \
      --out "$out/sparse/det_capture.json"
    grep '^{' "$out/sparse/console.log"
    ;;
  *)
    log "determinism.sh $stage"
    step "$stage" bash scripts/gpu/determinism.sh "$stage"
    tail -12 "$out/$stage/console.log" | grep -v "^bootstrap"
    ;;
  esac
done
log "done"
touch /root/visit.done
