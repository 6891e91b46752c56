#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, wheels staged with --with-snakemake): the short
# canonical soak through the DAG with a CUDA MPS daemon, then the evidence packed into $OUT:
# the soak's results and logs (checkpoints and the event file left out for size), the phase
# breakdown and the reward curve computed here from the event file.
#
#   bash scripts/gpu/bootstrap.sh bash scripts/gpu/soak_short.sh
#
# It outlasts one device command: start it detached (OUT=/root/soak-out setsid ...) and collect
# $OUT in a later command; scripts/gpu/README.md shows the calls.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
run=gpu-short
overlays=(config/gpu-short.yaml)
if [ -n "${ITERATIONS:-}" ]; then
  # A shorter soak of the same run (a smoke test of the DAG on the GPU): the minimum duration shrinks with it.
  printf 'runs:\n  gpu-short:\n    overrides:\n      algo.max_iterations: %s\n    soak:\n      min_duration_seconds: %s\n' \
    "$ITERATIONS" "${MIN_DURATION:-60}" >"$out/iterations.yaml"
  overlays+=("$out/iterations.yaml")
fi
if [ -f results/assets/manifest.json ] && [ -d resources/assets/g1 ]; then
  # Assets carried in (the machine has no index): newer than the code, so prefetch_assets stays done.
  touch results/assets/manifest.json
fi
python3 -m soaklab mps start
python3 -m soaklab mps status
python3 -m snakemake soak --cores 1 --configfile "${overlays[@]}" >"$out/snakemake.log" 2>&1
status=$?
tail -3 "$out/snakemake.log"
python3 -m soaklab mps stop
python3 -m soaklab.bench.gpu_phases "results/$run/train" --out "$out/phases.json" --steady-from 2000 \
  --curve-out "$out/reward_curve.json" >"$out/phases.log" 2>&1 || status=1
# Everything but the checkpoints and the bulky series (the event file, metrics.csv).
tar -czf "$out/soak-evidence.tgz" --exclude='*.pt' --exclude='events.out.tfevents.*' --exclude='metrics.csv' \
  "results/$run" "logs/$run" "benchmarks/rules/$run" results/assets/manifest.json 2>/dev/null
python3 - "$run" <<'PY'
import json, sys
run = sys.argv[1]
for name in ("soak", "validation"):
    try:
        d = json.load(open(f"results/{run}/{name}.json"))
    except OSError as exc:
        print(f"{name}: missing ({exc})")
        continue
    print(name, {k: d[k] for k in ("status", "passed", "classification", "duration_seconds") if k in d})
PY
echo "soak_short: exit $status"
exit $status
