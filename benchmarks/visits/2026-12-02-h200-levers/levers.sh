#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, from a copy of the checkout): the one-GPU throughput
# levers measured side by side in one visit, each against today's defaults run in the same visit.
#
#   OUT=/root/lever-out bash scripts/gpu/bootstrap.sh bash benchmarks/visits/2026-12-02-h200-levers/levers.sh
#
# 1. the env alone (`soaklab bench backend --backends mjwarp`) at 1024 and 4096 envs: the ceiling
#    the env step inside a run is held against;
# 2. the learner alone (`soaklab bench learner`): FlashSAC's recipe update at batch 2048, eager and
#    captured, for each algo.compile scope in COMPILE_SCOPES (default eager,nets,update), with the
#    kernels each update launches; the faster captured compile scope becomes BEST;
# 3. short training runs under CUDA MPS (RUNS: name:envs:iterations:override,override...; "@best"
#    in an override is BEST), each read back by scripts/gpu/gpu_phases.py (steady state from a
#    third of the iterations).
# 4. with AB set, the learning A/B of that setting against the gpu-learning record (below).
# Every stage repacks $OUT/levers.tgz as it ends, so a visit cut short keeps what finished. It
# outlasts one device command: start it detached and collect it (scripts/gpu/README.md).
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
echo $$ >/root/levers.pid  # collecting calls wait on this pid with kill -0
logs=/root/levers-logs
rm -rf "$logs" && mkdir -p "$logs"
stage() { echo "== $(date -u +%T) $*"; }
pack() { tar -C "$logs" -czf "$out/levers.tgz" . && stage "packed levers.tgz"; }

python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
  >"$logs/assets.log" 2>&1 || { cat "$logs/assets.log"; exit 2; }

if [ "${PROBE:-1}" != 0 ]; then
  for n in 1024 4096; do
    stage "the env alone at $n envs"
    python3 -m soaklab bench backend --backends mjwarp --num-envs "$n" --warmup 20 --iters 100 \
      --output "$logs/backend_$n.json" >"$logs/backend_$n.log" 2>&1 || tail -3 "$logs/backend_$n.log"
  done
  pack
fi

best=nets
if [ "${LEARNER_BENCH:-1}" != 0 ]; then
  stage "the learner alone: compile scopes ${COMPILE_SCOPES:-eager,nets,update}"
  python3 -m soaklab bench learner --algos flashsac --batch-sizes 2048 --compile "${COMPILE_SCOPES:-eager,nets,update}" \
    --warmup 10 --iters 100 --num-envs 1024 --output "$logs/learner.json" 2>&1 | tee "$logs/learner.log" | grep "bench learner"
  best=$(python3 - "$logs/learner.json" <<'EOF'
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["results"]
        if r["mode"] == "captured" and r["compile"]["ran"] not in ("eager",) and r["finite_diagnostics"]]
print(min(rows, key=lambda r: r["update_ms_median"])["compile"]["ran"] if rows else "eager")
EOF
)
  stage "fastest captured compile scope: $best"
  pack
fi

python3 -m soaklab mps start >"$logs/mps.log" 2>&1 || { cat "$logs/mps.log"; exit 2; }
default_runs="base:1024:1500: prio:1024:1500:training.collector_stream_priority=high \
best:1024:1500:algo.compile=@best best_prio:1024:1500:algo.compile=@best,training.collector_stream_priority=high \
one_update:1024:1500:algo.compile=@best,training.collector_stream_priority=high,algo.updates_per_step=1,algo.batch_size=4096 \
base_4096:4096:1200: best_prio_4096:4096:1200:algo.compile=@best,training.collector_stream_priority=high"
for spec in ${RUNS:-$default_runs}; do
  IFS=: read -r name envs iters extra <<<"$spec"
  overrides=()
  IFS=, read -ra extras <<<"${extra//@best/$best}"
  for o in "${extras[@]}"; do [ -n "$o" ] && overrides+=("$o"); done
  dir="/tmp/lever-$name"
  rm -rf "$dir"
  stage "run $name: $envs envs, $iters iterations, ${overrides[*]:-the defaults}"
  python3 -m soaklab train --algo flashsac --task g1_motion_tracking --sim mjwarp \
    training.cuda_process_sharing=mps "algo.num_envs=$envs" "algo.max_iterations=$iters" \
    algo.save_interval=100000 training.export_onnx=false training.no_play=true "training.log_dir=$dir" \
    "${overrides[@]}" >"$logs/train_$name.log" 2>&1 || echo "run $name: train exited $?"
  tail -1 "$logs/train_$name.log"
  python3 scripts/gpu/gpu_phases.py "$dir" --out "$logs/phases_$name.json" --steady-from $((iters / 3)) \
    --source "soaklab train --algo flashsac --sim mjwarp algo.num_envs=$envs ${overrides[*]} (benchmarks/visits/2026-12-02-h200-levers/levers.sh)" \
    >"$logs/phases_$name.log" 2>&1 || tail -3 "$logs/phases_$name.log"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); p=d['phases_per_iteration']; \
print('  ', d['steady_state']['env_steps_per_s'], 'env-steps/s; update', p['learner_update_ms']['median_ms'], \
'ms; env step', p['collector_env_step_ms']['mean_ms'], 'ms; iteration', p['iteration_ms']['median_ms'], 'ms')" \
    "$logs/phases_$name.json" 2>/dev/null
  cp "$dir/run_summary.json" "$logs/run_summary_$name.json" 2>/dev/null
  pack
done

# 4. AB (a record_overrides line, e.g. "algo.compile: update"): the learning record's three seeds
#    rerun with it through `snakemake reproduce` (side by side, as the record was made), compared
#    with the committed gpu-learning record at its fixed env-step counts.
if [ -n "${AB:-}" ]; then
  stage "learning A/B against the gpu-learning record: ${AB}"
  work=/root/lever-ab && rm -rf "$work" && mkdir -p "$work" && cp -a . "$work/tree" && rm -rf "$work/tree/.device"
  printf 'assets:\n  source: %s\nrecord_overrides:\n  %s\n' \
    "$(pwd)/resources/assets/cache/mjlab-1.6.0-py3-none-any.whl" "$AB" >"$work/ab.yaml"
  (cd "$work/tree" && python3 -m snakemake reproduce --config reproduce=gpu-learning --cores 16 --scheduler greedy \
     --configfile "$work/ab.yaml" >"$logs/reproduce-ab.log" 2>&1; echo "reproduce A/B: exit $?")
  tail -5 "$logs/reproduce-ab.log"
  mkdir -p "$logs/ab" && cp -a "$work/tree/results/reproduce" "$logs/ab/" 2>/dev/null
  for d in "$work"/tree/results/rec-gpu-learning-seed*; do
    [ -d "$d" ] && mkdir -p "$logs/ab/$(basename "$d")" && cp "$d"/*.json "$d"/train/*.json "$logs/ab/$(basename "$d")/" 2>/dev/null
  done
  cp -a "$work/tree/logs" "$logs/ab/logs" 2>/dev/null
  pack
fi
python3 -m soaklab mps stop >>"$logs/mps.log" 2>&1
stage "done"
