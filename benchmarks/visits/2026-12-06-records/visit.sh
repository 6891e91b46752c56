#!/usr/bin/env bash
# On the GPU machine, through scripts/gpu/bootstrap.sh, from a copy of the checkout (detached; it
# outlasts one device command): issue 49's closing measurements with the compiled-observations lever
# landed, in one visit.
#
#   OUT=/root/visit-out bash scripts/gpu/bootstrap.sh bash benchmarks/visits/2026-12-06-records/visit.sh
#
# Stages, each packed into $OUT/visit.tgz as it ends:
# 1. RECORDS (default gpu-soak-1024 gpu-throughput-4096) made with today's tree by scripts/gpu/records.sh
#    (its warm-up compiles mujoco_warp's kernels and times the raw ceiling; learning and evaluation
#    off); a record keeps each seed's metrics.json (its medians and phases_ms: the in-run env step);
# 2. the env step alone at SIZES (default 1024 4096; bench backend: phases, both ceilings);
# 3. the motion library against the one-clip env and each block alone at LIBRARY_SIZES (default 1024).
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
echo $$ >/root/visit.pid
logs=/root/visit-logs
rm -rf "$logs" && mkdir -p "$logs"
stage() { echo "== $(date -u +%T) $*" | tee -a "$logs/stages.log"; }
pack() { tar -C "$logs" -czf "$out/visit.tgz" . && stage "packed visit.tgz"; }

records=${RECORDS-gpu-soak-1024 gpu-throughput-4096}
if [ -n "$records" ]; then
  stage "records: $records"
  LEARNING=0 EVALUATE=0 RECORDS=$records bash scripts/gpu/records.sh 2>&1 | tee "$logs/records.log"
  cp "$out/ceiling.json" "$logs/ceiling.json" 2>/dev/null
  for name in $records; do cp -a "/root/records-work/record/records/$name" "$logs/record-$name" 2>/dev/null; done
  pack
else
  python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
    >"$logs/assets.log" 2>&1 || { cat "$logs/assets.log"; exit 2; }
fi

for n in ${SIZES-1024 4096}; do
  stage "env alone, $n envs"
  python3 -m soaklab bench backend --backends mjwarp --num-envs "$n" --warmup 30 --iters 200 \
    --output "$logs/backend_$n.json" >"$logs/backend_$n.log" 2>&1 || tail -3 "$logs/backend_$n.log"
  grep -h "mjwarp" "$logs/backend_$n.log" | tail -2
done
pack

for n in ${LIBRARY_SIZES-1024}; do
  stage "library against one clip, $n envs"
  python3 benchmarks/visits/2026-12-03-h200-library-streams/library_step.py --num-envs "$n" --out "$logs/library_step_$n.json" \
    >"$logs/library_step_$n.log" 2>&1 || tail -3 "$logs/library_step_$n.log"
  grep -h "library_step" "$logs/library_step_$n.log"
done
pack
stage "done"
rm -f /root/visit.pid
