#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, wheels staged with --with-snakemake): the short
# canonical soak through the DAG with a CUDA MPS daemon, then the evidence packed into $OUT.
#
#   bash scripts/gpu/bootstrap.sh bash scripts/gpu/soak_short.sh
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
run=gpu-short
python3 -m soaklab mps start
python3 -m soaklab mps status
python3 -m snakemake soak --cores 1 --configfile config/gpu-short.yaml >"$out/snakemake.log" 2>&1
status=$?
tail -3 "$out/snakemake.log"
python3 -m soaklab mps stop
# Everything but the checkpoints: soak, metrics and validation JSON, the run's own artifacts, logs.
tar -czf "$out/soak-evidence.tgz" --exclude='*.pt' "results/$run" "logs/$run" "benchmarks/rules/$run" \
  results/assets/manifest.json 2>/dev/null
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
exit $status
