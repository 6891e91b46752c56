#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh): the deterministic mode's acceptance (docs/determinism.md,
# issue 67), one stage per device command (each well under its 10 minutes on an H100):
#
#   bash scripts/gpu/bootstrap.sh bash scripts/gpu/determinism.sh STAGE
#
# warm      mujoco_warp's kernels compiled in both modes (the deterministic ones are new to a carried
#           cache) and the raw physics ceiling of each at 1024 and 4096 worlds (scripts/gpu/warmup.py);
#           bootstrap.sh then packs the kernel cache: keep it (keep-cache.sh) and carry it to the next.
# bits      five runs at once under one MPS daemon, FlashSAC on G1, MJWarp, 1024 envs, 300 iterations
#           (568 updates), traced (SOAKLAB_TRACE=1): A and B deterministic, C and E default, D
#           deterministic killed at iteration 150 (SOAKLAB_FAULT=kill_learner@150) and resumed from its
#           checkpoint at 100. `soaklab diff-runs` compares A with B, A with D (traces, series, final
#           weights: equal), A with C, and C with E (the default mode: where its runs part).
# fresh     two traced deterministic runs (40 iterations), one after the other, each compiling into an
#           empty torch.compile cache: do fresh compiles part (what a later visit's reproduction
#           does), and at which tensor; their run dirs (trace, series, no checkpoints) are packed
#           whole, with step 16's tensors (the first update round) saved. FRESH_RUNS="F" runs one;
#           AGAINST=DIR (an earlier visit's packed F, committed) is compared with this visit's F.
# soak      `snakemake soak --configfile config/gpu-deterministic.yaml`, then the same with
#           `-R train_soak`: diff-runs of the two run dirs (series and final weights).
# cost      env-steps/s of the deterministic and default modes at 1024 and 4096 envs, each run alone,
#           with the phases (scripts/gpu/gpu_phases.py: update, the collector's env step) beside the
#           physics alone of each mode on this machine (warmup.py; task = env step - physics), and the
#           env step alone with its physics and task parts timed apart (library_world.py, one clip, in
#           each mode; needs the holosoma clip wheel in resources/assets/cache); two tables.
# learning  the gpu-learning record reproduced with record_overrides training.deterministic: true (its
#           three seeds side by side): the mode's learning against the record's bands.
# record    `soaklab record update gpu-deterministic`, then `snakemake reproduce` of it on this
#           machine; a later visit reproduces it with REPRODUCE=gpu-deterministic scripts/gpu/reproduce.sh.
#
# Each stage packs its evidence into $OUT/determinism-STAGE.tgz (no checkpoints, no replay), then exits
# 1 if a comparison it expects equal (A-B, A-D, F-G, F against AGAINST, the soak and its rerun) differs
# or a reproduction or record update fails; A-C and C-E (the default mode) are reported only.
# Run the stages one after the other: the soak stage's DAG pulls the assets again into
# results/assets/manifest.json, which the bits stage's runs were resolved against, so a resume of D
# beside it is refused (2026-12-07, benchmarks/visits/2026-12-07-det-deploy/).
set -uo pipefail
stage=${1:-bits}
# the stage named first, before its folder is emptied: work=/root/determinism/$stage, so a stage of
# '..' would remove /root (the checkout with it)
case $stage in
warm|bits|fresh|soak|cost|learning|record) ;;
*) echo "determinism.sh: unknown stage '$stage' (warm, bits, fresh, soak, cost, learning, record)" >&2; exit 2 ;;
esac
out=${OUT:-/tmp/soaklab-out}
here=$(pwd)
if [ "$stage" = fresh ]; then  # its settings, before anything is removed or started
  runs=${FRESH_RUNS:-F G}
  case $runs in
  F|"F G") ;;
  *) echo "FRESH_RUNS='$runs': expected F or 'F G' (the runs' names are their folders)" >&2; exit 2 ;;
  esac
  against=
  if [ -n "${AGAINST:-}" ]; then
    case $AGAINST in /*) against=$AGAINST ;; *) against=$here/$AGAINST ;; esac
    [ -d "$against/trace" ] || { echo "AGAINST=$AGAINST: no trace/ there (an earlier visit's packed F)" >&2; exit 2; }
    case $(realpath "$against")/ in /root/determinism/fresh/*)  # emptied below, before F runs
      echo "AGAINST=$AGAINST: inside /root/determinism/fresh, which this stage empties; copy it out first" >&2; exit 2 ;;
    esac
  fi
fi
work=/root/determinism/$stage
pack=$work/pack
log() { echo "== $(date -u +%T) $*"; }
rm -rf "$work" && mkdir -p "$pack"
wheel=$here/resources/assets/cache/mjlab-1.6.0-py3-none-any.whl
printf 'assets:\n  source: %s\n' "$wheel" >"$work/assets.yaml"
smk=(--cores 16 --scheduler greedy --configfile "$work/assets.yaml")
python3 -m soaklab assets pull --robot g1 --source "$wheel" >"$work/assets.log" 2>&1 || { cat "$work/assets.log"; exit 2; }
python3 -m soaklab mps start >"$work/mps.log" 2>&1 || { cat "$work/mps.log"; exit 2; }
unset SOAKLAB_FAULT SOAKLAB_TRACE SOAKLAB_TRACE_DUMP

# The gpu-det run of config/gpu-deterministic.yaml, as `soaklab train` arguments.
base=(--algo flashsac --task g1_motion_tracking --sim mjwarp --skip-post-training
      training.cuda_process_sharing=mps training.mps_learner_thread_percentage=50 training.dp_ranks=1
      algo.num_envs=1024 algo.replay_buffer_size=307200)
run=("${base[@]}" algo.max_iterations=300 algo.save_interval=100)
train() {  # train NAME [KEY=VALUE...]: a run dir under $work, its console in NAME.log
  local name=$1; shift
  python3 -m soaklab train "${run[@]}" "$@" "training.log_dir=$work/$name" >"$work/$name.log" 2>&1
  echo "train $name: exit $?"
}
keep() {  # what of a run dir comes home: everything but checkpoints and resumable state
  for dir in "$@"; do
    mkdir -p "$pack/$(basename "$dir")"
    (cd "$dir" && tar -cf - --exclude=checkpoints --exclude=resume . ) | tar -C "$pack/$(basename "$dir")" -xf -
  done
}
diff_runs() {  # diff_runs A B: soaklab diff-runs, its output kept; its exit status returned
  python3 -m soaklab diff-runs "$1" "$2" 2>&1 | tee -a "$pack/diff-runs.txt"
  local rc=${PIPESTATUS[0]}
  echo "diff-runs $(basename "$1") $(basename "$2"): exit $rc" | tee -a "$pack/diff-runs.txt"
  return "$rc"
}
# What the stage claims: every comparison expected equal that is not (or a reproduction that does not
# pass) is counted, and the stage exits 1 after packing, so a visit's step line says whether it held.
parted=0
expect_equal() {  # expect_equal A B: diff_runs, counted when they differ or cannot be compared
  diff_runs "$1" "$2" || parted=$((parted + 1))
}

copy_run() {  # copy_run DEST: the gpu-det soak's run dir (no resumable state) and its soak JSON
  mkdir -p "$1/train" && cp results/gpu-det/soak.json results/gpu-det/validation.json "$1/" 2>/dev/null
  (cd results/gpu-det/train && tar -cf - --exclude=resume . ) | tar -C "$1/train" -xf -
}

case $stage in
warm)
  for mode in default deterministic; do
    log "warm-up: mujoco_warp's $mode kernels, the raw ceiling"
    flag=(); [ "$mode" = deterministic ] && flag=(--deterministic)
    python3 scripts/gpu/warmup.py --worlds 1024,4096 "${flag[@]}" --out "$pack/ceiling-$mode.json" \
      >"$work/warmup-$mode.log" 2>&1; echo "warmup $mode: exit $?"; tail -3 "$work/warmup-$mode.log"
  done
  ;;
bits)
  log "A, B (deterministic), C, E (default), D (deterministic, killed at 150) at once, traced"
  export SOAKLAB_TRACE=1
  train A training.deterministic=true &
  train B training.deterministic=true &
  train C &
  train E &
  (export SOAKLAB_FAULT=kill_learner@150; train D training.deterministic=true; unset SOAKLAB_FAULT
   log "D: resume"
   python3 -m soaklab train --resume "$work/D" >"$work/D-resume.log" 2>&1; echo "train --resume D: exit $?") &
  wait
  unset SOAKLAB_TRACE
  for name in A B C D E; do grep -h "^train: \(completed\|failed\|resuming\)" "$work/$name.log" "$work/$name-resume.log" 2>/dev/null; done
  log "compare"
  expect_equal "$work/A" "$work/B"
  expect_equal "$work/A" "$work/D"
  diff_runs "$work/A" "$work/C"
  diff_runs "$work/C" "$work/E"  # the default mode against itself: where GPU runs part without the mode
  python3 - "$work"/A "$work"/C <<'EOF' | tee -a "$pack/diff-runs.txt"
import json, sys
from pathlib import Path
for run in map(Path, sys.argv[1:]):  # what each mode ran: the env's kernels, and whether the graphs held
    env = json.loads((run / "backend_diagnostics.json").read_text())["diagnostics"]
    learner = json.loads((run / "run_summary.json").read_text())["runtime_manifest"].get("learner_diagnostics") or {}
    print(run.name, "opt.deterministic", env.get("deterministic"), "env step graph", env["cuda_graph"],
          "learner graphs", json.dumps(learner.get("cuda_graph")))
EOF
  keep "$work"/A "$work"/B "$work"/C "$work"/D "$work"/E
  ;;
fresh)
  # A later visit's reproduction of gpu-deterministic parted at its first update's round (Loss/ at
  # iteration 17, Train/ equal until then: benchmarks/visits/2026-12-07-det-later/), while two runs of
  # one visit, which share torch.compile's cache, agree. Here each traced run compiles alone, into a
  # cache of its own, one after the other (F, G): if they part, the trace names the first tensor and
  # stage. A later visit runs F again against this one's (AGAINST): machine against machine.
  log "$runs (deterministic, each compiling into an empty torch.compile cache), traced, 40 iterations"
  export SOAKLAB_TRACE=1 SOAKLAB_TRACE_DUMP=16  # the first update round's tensors, whole
  for name in $runs; do  # (triton's kernels go under inductor's folder unless TRITON_CACHE_DIR names another)
    (unset SOAKLAB_COMPILE_CACHE_BASE TRITON_CACHE_DIR; export TORCHINDUCTOR_CACHE_DIR=$work/cache-$name
     run=("${base[@]}" algo.max_iterations=40 algo.save_interval=40); train "$name" training.deterministic=true)
  done
  unset SOAKLAB_TRACE SOAKLAB_TRACE_DUMP
  [ "$runs" = "F G" ] && expect_equal "$work/F" "$work/G"
  [ -n "$against" ] && expect_equal "$against" "$work/F"
  keep $(for name in $runs; do echo "$work/$name"; done)
  # step 16's tensors stay on the machine (/root/determinism/fresh/NAME/trace/, 80 MB with the weights,
  # past what one file brings home): the collecting call splits what it needs
  find "$pack" -name '*-16-*.pt' -delete
  ;;
soak)
  log "snakemake soak (gpu-det)"
  python3 -m snakemake soak "${smk[@]}" "$here/config/gpu-deterministic.yaml" >"$work/soak-1.log" 2>&1
  echo "snakemake soak: exit $?"
  copy_run "$work/first"
  log "snakemake soak -R train_soak"
  python3 -m snakemake soak -R train_soak "${smk[@]}" "$here/config/gpu-deterministic.yaml" >"$work/soak-2.log" 2>&1
  echo "snakemake soak -R train_soak: exit $?"
  expect_equal "$work/first/train" "$here/results/gpu-det/train"
  copy_run "$work/rerun"
  keep "$work/first" "$work/rerun"
  ;;
cost)
  for mode in default deterministic; do  # the physics alone, on this machine (kernels from the warm stage)
    flag=(); [ "$mode" = deterministic ] && flag=(--deterministic)
    python3 scripts/gpu/warmup.py --worlds 1024,4096 "${flag[@]}" --out "$pack/ceiling-$mode.json" \
      >"$work/warmup-$mode.log" 2>&1; echo "warmup $mode: exit $?"
    # the env step alone, its physics and its task part (terms, resets, observations) apart, CUDA events
    python3 scripts/gpu/library_world.py --layouts one_clip --envs 1024,4096 "${flag[@]}" --assets "$work/env-assets" \
      --out "$pack/env-$mode.json" >"$work/env-$mode.log" 2>&1; echo "library_world $mode: exit $?"
  done
  for envs in 1024 4096; do
    for mode in default deterministic; do
      # the deterministic step is 7 to 12 times slower (2026-12-07-det-dense): fewer iterations, the same
      # steady half to read
      if [ $mode = default ]; then iterations=$(( envs == 1024 ? 1000 : 600 )); else iterations=$(( envs == 1024 ? 400 : 300 )); fi
      name=cost-$mode-$envs
      log "$name ($iterations iterations, alone)"
      python3 -m soaklab train --algo flashsac --task g1_motion_tracking --sim mjwarp --skip-post-training \
        training.cuda_process_sharing=mps training.mps_learner_thread_percentage=50 training.dp_ranks=1 \
        "training.deterministic=$([ $mode = deterministic ] && echo true || echo false)" "algo.num_envs=$envs" \
        "algo.max_iterations=$iterations" "algo.save_interval=$iterations" "training.log_dir=$work/$name" \
        >"$work/$name.log" 2>&1; echo "train $name: exit $?"
      python3 scripts/gpu/gpu_phases.py "$work/$name" --out "$pack/phases-$name.json" --steady-from $(( iterations / 2 )) \
        --source "scripts/gpu/determinism.sh cost" >/dev/null 2>&1 || echo "gpu_phases $name failed"
    done
  done
  python3 - "$pack" "$pack" <<'EOF' | tee "$pack/cost.md"
import json, sys
from pathlib import Path
pack, warm = Path(sys.argv[1]), Path(sys.argv[2])
def ceiling(mode, envs):
    try:
        runs = json.loads((warm / f"ceiling-{mode}.json").read_text())["runs"]
        return next(r["control_step_ms_median"] for r in runs if r["worlds"] == envs)
    except (OSError, StopIteration, KeyError, ValueError):
        return None
print("| envs | mode | env-steps/s (steady) | with start-up | iteration ms | env step ms in the run | physics alone ms | "
      "task and sharing ms | update ms | inference ms |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
rates = {}
for envs in (1024, 4096):
    for mode in ("default", "deterministic"):
        try:
            p = json.loads((pack / f"phases-cost-{mode}-{envs}.json").read_text())
        except (OSError, ValueError):
            print(f"| {envs} | {mode} | (no run) |"); continue
        ph = p["phases_per_iteration"]
        env_step = ph.get("collector_env_step_ms", {}).get("mean_ms")
        physics = ceiling(mode, envs)
        task = None if env_step is None or physics is None else env_step - physics
        rates[(envs, mode)] = p["steady_state"]["env_steps_per_s"]  # the whole loop, past start-up
        fmt = lambda v: "-" if v is None else f"{v:.2f}"
        print(f"| {envs} | {mode} | {p['steady_state']['env_steps_per_s']:,.0f} | {p['end_to_end_env_steps_per_s']:,.0f} | "
              f"{ph['iteration_ms']['median_ms']:.2f} | {fmt(env_step)} | {fmt(physics)} | {fmt(task)} | "
              f"{ph['learner_update_ms']['median_ms']:.2f} | {ph['learner_inference_ms']['median_ms']:.2f} |")
print("\nThe env step alone (library_world.py, one clip):\n")
print("| envs | mode | whole step ms | physics ms | task ms (terms, resets, observations) |")
print("|---:|---|---:|---:|---:|")
for mode in ("default", "deterministic"):
    try:
        alone = json.loads((pack / f"env-{mode}.json").read_text())["runs"]
    except (OSError, ValueError, KeyError):
        print(f"| - | {mode} | (no run) |"); continue
    for r in alone:
        print(f"| {r['envs']} | {mode} | {r['step_ms']:.2f} | {r['physics_ms']:.2f} | {r['task_ms']:.2f} |")
for envs in (1024, 4096):
    if (envs, "default") in rates and (envs, "deterministic") in rates:
        ratio = rates[(envs, "deterministic")] / rates[(envs, "default")]
        print(f"\n{envs} envs: deterministic / default env-steps/s of the whole loop = {ratio:.2f} (goal >= 0.7)")
EOF
  for name in "$work"/cost-*; do [ -d "$name" ] && keep "$name"; done
  ;;
learning)
  log "gpu-learning reproduced in the deterministic mode (three seeds side by side)"
  printf 'record_overrides:\n  training.deterministic: true\n' >"$work/deterministic.yaml"
  python3 -m snakemake reproduce --config reproduce=gpu-learning "${smk[@]}" "$work/deterministic.yaml" \
    >"$work/reproduce.log" 2>&1; rc=$?; echo "snakemake reproduce gpu-learning (deterministic): exit $rc"
  [ "$rc" = 0 ] || parted=$((parted + 1))
  cat results/reproduce/gpu-learning/verdict.txt 2>/dev/null
  cp -a results/reproduce/gpu-learning "$pack/comparison" 2>/dev/null
  cp -a logs/rec-gpu-learning-seed* "$pack/" 2>/dev/null
  ;;
record)
  log "record update gpu-deterministic"
  python3 -m soaklab record update gpu-deterministic --cores 16 -- --scheduler greedy \
    --configfile "$work/assets.yaml" >"$work/record.log" 2>&1; rc=$?; echo "record update: exit $rc"
  [ "$rc" = 0 ] || parted=$((parted + 1))
  tail -3 "$work/record.log"
  log "reproduce gpu-deterministic on this machine"
  python3 -m snakemake reproduce --config reproduce=gpu-deterministic "${smk[@]}" >"$work/reproduce.log" 2>&1
  rc=$?; echo "snakemake reproduce gpu-deterministic: exit $rc"; [ "$rc" = 0 ] || parted=$((parted + 1))
  cat results/reproduce/gpu-deterministic/verdict.txt 2>/dev/null
  cp -a records/gpu-deterministic "$pack/record" 2>/dev/null
  cp -a results/reproduce/gpu-deterministic "$pack/comparison" 2>/dev/null
  ;;
esac

# The MPS daemon stays: a stage run beside another (or the DAG's -R rerun) still needs it, and the
# machine goes back bare at the end of the visit (2026-12-07: a stop here failed the soak stage's rerun).
cp "$work"/*.log "$pack/" 2>/dev/null
tar -C "$pack" -czf "$out/determinism-$stage.tgz" . && log "packed determinism-$stage.tgz ($(du -h "$out/determinism-$stage.tgz" | cut -f1))"
if [ "$parted" -gt 0 ]; then
  echo "determinism.sh $stage: $parted comparison(s) expected equal differ or did not pass (diff-runs.txt, the logs)"
  exit 1
fi
