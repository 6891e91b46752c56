#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, with the holosoma clip wheel carried in its own run and
# copied into resources/assets/cache, scripts/gpu/README.md): the motion library as one world set
# against one env per clip, and the run's env step with a lever on and off (issue 68).
#
#   bash scripts/gpu/bootstrap.sh bash scripts/gpu/library_world.sh [env] [runs]      (WORK: its folder, /root/library-world)
#
# Stages (all by default; name some to run only those):
#   env   the raw physics ceiling (warmup.py, ceiling.json) and the env step by phase (physics,
#         task, whole step; CUDA events after warm-up) of one clip, the library's blocks and its
#         world set at SIZES (default 1024 4096) envs: library_world.json. About 4 minutes on an
#         H100 with a warm kernel cache (COMPILE=0: the task's terms eager, faster to build).
#   runs  the library recipe (largebox + crawl_slope) trained ITERATIONS (default 1500) iterations
#         at each of SIZES under MPS (the learner at half the GPU, as the GPU records), once per
#         lever setting in LEVERS (space-separated NAME:OVERRIDE[,OVERRIDE]; default the collector's
#         stream priority off and on: "default:training.collector_stream_priority=default
#         high:training.collector_stream_priority=high"; e.g. add
#         "learner100:training.mps_learner_thread_percentage=100"), then gpu_phases.py on each from
#         STEADY_FROM (default 500): phases-<envs>-<name>.json. About 1.5 minutes a run, start-up
#         included: with env, over 9 minutes; on a short lease run `env` and `runs` in two calls.
# Everything lands in one archive, $OUT/library_world.tgz (and bootstrap.sh's kernel cache parts).
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
work=${WORK:-/root/library-world}
stages=${*:-env runs}
sizes=${SIZES:-1024 4096}
stage() { echo "== $(date -u +%T) $*"; }
mkdir -p "$work/pack" "$out"
ls resources/assets/cache/holosoma-*.whl >/dev/null 2>&1 \
  || { echo "library_world: no holosoma wheel in resources/assets/cache (scripts/gpu/README.md, step 3)" >&2; exit 2; }

if [[ " $stages " == *" env "* ]]; then
  stage "the raw ceiling at ${sizes// /,} worlds"
  python3 scripts/gpu/warmup.py --worlds "${sizes// /,}" --out "$work/pack/ceiling.json" >"$work/pack/warmup.log" 2>&1 \
    || tail -5 "$work/pack/warmup.log"
  stage "the env step: one clip, blocks, world set"
  compile=(); [ "${COMPILE:-1}" = 0 ] && compile=(--no-compile)
  python3 scripts/gpu/library_world.py --envs "${sizes// /,}" --assets "$work/assets" "${compile[@]}" \
    --out "$work/pack/library_world.json" >"$work/pack/library_world.log" 2>&1; echo "library_world: exit $?"
  tail -6 "$work/pack/library_world.log"
  tar -C "$work/pack" -czf "$out/library_world.tgz" . && stage "packed library_world.tgz"
fi

if [[ " $stages " == *" runs "* ]]; then
  manifest=$work/assets/manifest.json
  [ -f "$manifest" ] || python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
    --clip-wheel "$(ls resources/assets/cache/holosoma-*.whl)" --dest "$work/assets/resources" --manifest "$manifest" \
    >"$work/pack/assets.log" 2>&1
  python3 -m soaklab mps start >"$work/pack/mps.log" 2>&1 || { cat "$work/pack/mps.log"; exit 2; }
  its=${ITERATIONS:-1500}
  levers=${LEVERS:-default:training.collector_stream_priority=default high:training.collector_stream_priority=high}
  for n in $sizes; do
    for lever in $levers; do
      name=${lever%%:*}
      IFS=, read -r -a set <<<"${lever#*:}"
      run=$work/run-$n-$name
      stage "train the library at $n envs, lever $name (${set[*]})"
      rm -rf "$run"
      python3 -m soaklab train --algo flashsac --task g1_motion_tracking --sim mjwarp --skip-post-training \
        --assets-manifest "$manifest" training.cuda_process_sharing=mps training.mps_learner_thread_percentage=50 \
        "env.motion=[largebox,crawl_slope]" "algo.num_envs=$n" "algo.max_iterations=$its" "algo.save_interval=$its" \
        "${set[@]}" "training.log_dir=$run" >"$work/pack/train-$n-$name.log" 2>&1
      echo "train $n $name: exit $?"
      python3 scripts/gpu/gpu_phases.py "$run" --out "$work/pack/phases-$n-$name.json" \
        --steady-from "${STEADY_FROM:-500}" --source "library_world.sh runs: $n envs, ${set[*]}" \
        >>"$work/pack/phases.log" 2>&1; echo "phases $n $name: exit $?"
      cp "$run/run_summary.json" "$work/pack/run_summary-$n-$name.json" 2>/dev/null
      tar -C "$work/pack" -czf "$out/library_world.tgz" . && stage "packed library_world.tgz"
    done
  done
  python3 -m soaklab mps stop >>"$work/pack/mps.log" 2>&1
fi
stage "done"
