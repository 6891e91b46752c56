#!/usr/bin/env bash
# On the GPU machine, through scripts/gpu/bootstrap.sh, from a copy of the checkout (detached; it
# outlasts one device command): issue 49's levers measured against the baseline in one visit.
#
#   OUT=/root/visit-out bash scripts/gpu/bootstrap.sh bash benchmarks/visits/2026-12-06-levers/visit.sh
#
# The checkout is the lever's tree: the baseline is the same tree with the lever's patch (LEVER_PATCH)
# taken back out (`git apply -R`). Stages, each packed into $OUT/visit.tgz as it ends:
# 1. mujoco_warp's kernels compiled, the raw physics ceiling at 1024 and 4096 worlds (scripts/gpu/warmup.py);
# 2. the env step alone, baseline and lever alternated (ABAB) at AB_SIZES envs (default 1024 4096), REPEATS
#    times (default 2; bench backend);
# 3. mjlab's own tracking env stepped alone on the same clip at 4096 envs (mjlab_env.py here; its wheels
#    carried to /root/mjlab-wheels in a call of their own; MJLAB_SIZES, default "4096 1024", empty skips),
#    with soaklab's env beside it from stage 2;
# 4. RECORDS (default gpu-soak-1024 gpu-throughput-4096) made with the lever's tree by
#    scripts/gpu/records.sh (learning and evaluation off); their run dirs' phases read by gpu_phases.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
echo $$ >/root/visit.pid
here=$(pwd)
logs=/root/visit-logs
rm -rf "$logs" && mkdir -p "$logs/ab"
stage() { echo "== $(date -u +%T) $*" | tee -a "$logs/stages.log"; }
pack() { tar -C "$logs" -czf "$out/visit.tgz" . && stage "packed visit.tgz"; }
patch=${LEVER_PATCH:-benchmarks/visits/2026-12-05-h100-profile/compiled-observations.patch}

python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
  >"$logs/assets.log" 2>&1 || { cat "$logs/assets.log"; exit 2; }
rm -rf /root/ab-base && cp -a "$here/." /root/ab-base && (cd /root/ab-base && git apply -R "$here/$patch") \
  || { echo "visit: $patch does not come back out of the tree" >&2; exit 2; }

stage "compile mujoco_warp's kernels; the raw ceiling"
python3 scripts/gpu/warmup.py --worlds 1024,4096 --out "$logs/ceiling.json" >"$logs/warmup.log" 2>&1 || tail -3 "$logs/warmup.log"
pack

for rep in $(seq 1 "${REPEATS:-2}"); do
  for n in ${AB_SIZES:-1024 4096}; do
    for side in base lever; do
      tree=$here; [ "$side" = base ] && tree=/root/ab-base
      stage "env alone, $side, $n envs, repeat $rep"
      (cd "$tree" && PYTHONPATH=/root/site:$tree/src python3 -m soaklab bench backend --backends mjwarp \
         --num-envs "$n" --warmup 30 --iters 200 --assets-manifest "$here/results/assets/manifest.json" \
         --output "$logs/ab/$side-$n-$rep.json" >"$logs/ab/$side-$n-$rep.log" 2>&1) || tail -3 "$logs/ab/$side-$n-$rep.log"
      grep -h "mjwarp" "$logs/ab/$side-$n-$rep.log" | tail -2
    done
  done
  pack
done

mjlab_sizes=${MJLAB_SIZES-4096 1024}
ls /root/mjlab-wheels/*.whl >/dev/null 2>&1 || mjlab_sizes=""
if [ -n "$mjlab_sizes" ]; then
  stage "mjlab's env alone"
  mkdir -p /root/mjlab-site
  python3 -m pip install -q --no-index --no-deps --no-compile --target /root/mjlab-site \
    resources/assets/cache/mjlab-1.6.0-py3-none-any.whl /root/mjlab-wheels/*.whl >"$logs/mjlab-pip.log" 2>&1 \
    || tail -3 "$logs/mjlab-pip.log"
  for n in $mjlab_sizes; do
    PYTHONPATH=/root/site:/root/mjlab-site:$here/src python3 benchmarks/visits/2026-12-06-levers/mjlab_env.py --num-envs "$n" \
      --out "$logs/mjlab_env_$n.json" >"$logs/mjlab_env_$n.log" 2>&1 || tail -5 "$logs/mjlab_env_$n.log"
    tail -1 "$logs/mjlab_env_$n.log"
  done
fi
pack

records=${RECORDS-gpu-soak-1024 gpu-throughput-4096}
if [ -z "$records" ]; then stage "done (RECORDS empty: no records)"; rm -f /root/visit.pid; exit 0; fi
stage "records with the lever's tree"
LEARNING=0 EVALUATE=0 RECORDS=$records bash scripts/gpu/records.sh 2>&1 | tee "$logs/records.log"
find /root/records-work/record/results -name run_summary.json >"$logs/run-dirs.txt" 2>/dev/null
while read -r summary; do  # the records keep metrics, not run dirs: the phases are read here
  run=$(dirname "$summary"); name=$(basename "$(dirname "$run")")
  python3 scripts/gpu/gpu_phases.py "$run" --out "$logs/phases-$name.json" \
    --source "issue 49 levers visit, $name" >"$logs/phases-$name.log" 2>&1 || tail -2 "$logs/phases-$name.log"
done <"$logs/run-dirs.txt"
pack
stage "done"
rm -f /root/visit.pid
