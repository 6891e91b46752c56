#!/usr/bin/env bash
# Two visits for issue 67, after benchmarks/visits/2026-12-07-det-later/ (whose reproduction of
# gpu-deterministic parted at its first update round), each from a copy of the checkout at /root/work
# with both pinned wheels in resources/assets/cache/ (scripts/gpu/README.md, step 4):
#
#   (setsid nohup bash benchmarks/visits/2026-12-07-det-fresh/visit.sh [STAGE...] >/root/visit.log 2>&1 </dev/null &)
#
# first visit:  record fresh soak   (gpu-deterministic remade from a clean commit with the one-block
#                                    contact Jacobian; two traced runs, each compiling afresh; the
#                                    soak and its -R train_soak rerun)
# later visit:  adds reproduce against cost learning
#               (the step with and without soaklab.sim.mjwarp_exact_adds, bits first; the record
#               reproduced on a fresh machine; a traced run compared with the first visit's F, tensor by
#               tensor; the cost table; learning against gpu-learning's bands)
#
# reproduce  REPRODUCE=gpu-deterministic scripts/gpu/reproduce.sh (`snakemake reproduce`, `record keep`);
# against    determinism.sh fresh with FRESH_RUNS=F and AGAINST=<this folder>/fresh/F (committed from
#            the first visit);
# and any stage of scripts/gpu/determinism.sh (record, fresh, soak, cost, learning, ...), one after
# the other, alone on the GPU. Everything lands under /root/visit-out, one folder per step;
# /root/visit.done marks the end.
set -uo pipefail
cd /root/work
out=/root/visit-out
mkdir -p "$out" && rm -f /root/visit.done
source scripts/gpu/visit_steps.sh  # log, step
stages=("$@"); [ ${#stages[@]} -gt 0 ] || stages=(record fresh soak)
for stage in "${stages[@]}"; do
  case $stage in
  reproduce)
    log "reproduce gpu-deterministic"
    REPRODUCE=gpu-deterministic step reproduce bash scripts/gpu/reproduce.sh
    tail -8 "$out/reproduce/console.log" | grep -v "^bootstrap"
    ;;
  adds)  # the deterministic captured step with and without soaklab.sim.mjwarp_exact_adds (its records kept)
    for adds in soaklab mujoco-warp; do
      log "det_capture --exact-adds $adds: deterministic, ${WORLDS:-1024} worlds, captured, census"
      step "adds-$adds" python3 scripts/gpu/det_capture.py --worlds "${WORLDS:-1024}" --jacobians auto \
        --modes deterministic --graphs capture --census 5 --exact-adds "$adds" --out "$out/adds-$adds/det_capture.json"
      grep '^{' "$out/adds-$adds/console.log" | cut -c1-400
    done
    # the same state after the same steps with and without the records: equal digests, no bit changed
    grep -H '"state_sha256"' "$out"/adds-*/det_capture.json
    ;;
  against)
    log "determinism.sh fresh: F against the first visit's"
    FRESH_RUNS=F AGAINST=benchmarks/visits/2026-12-07-det-fresh/fresh/F step against bash scripts/gpu/determinism.sh fresh
    tail -12 "$out/against/console.log" | grep -v "^bootstrap"
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
