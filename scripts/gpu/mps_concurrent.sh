#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh): N (default 4) short trainings started at the same
# instant under one CUDA MPS daemon must all complete (issue 65: two runs started together once
# failed at iteration 0 when the busy control daemon refused one's `get_server_list`; docs/mps.md).
#
#   bash scripts/gpu/bootstrap.sh bash scripts/gpu/mps_concurrent.sh
#
# 1. the G1 assets and mujoco_warp's kernels (scripts/gpu/warmup.py, at the runs' env count), so
#    the runs load compiled kernels instead of compiling the same ones four times at once;
# 2. `soaklab mps start`; then N `soaklab train` (FlashSAC, G1, MJWarp, ENVS envs, ITERATIONS
#    iterations, training.cuda_process_sharing=mps), each waiting on one file and released together;
# 3. each run's exit code, run_summary.json status and MPS evidence, and its log, with the daemon's
#    control log, in $OUT/mps_concurrent.tgz; `soaklab mps stop`.
# Exit 0 only if all N exited 0 with status completed. About 5 minutes with the kernel cache carried.
set -uo pipefail
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1 || ! command -v nvidia-cuda-mps-control >/dev/null; then
  echo "mps_concurrent: needs an NVIDIA GPU with nvidia-smi and nvidia-cuda-mps-control; run it on the GPU machine through bootstrap.sh (scripts/gpu/README.md)" >&2
  exit 2
fi
out=${OUT:-/tmp/soaklab-out}
n=${N:-4}
envs=${ENVS:-1024}
iterations=${ITERATIONS:-1000}
limit=${RUN_LIMIT_S:-400}  # a run still going after this is interrupted, so the evidence still comes home
clip=${CLIP:-largebox}  # synthetic: no clip wheel to carry (the race under test is MPS control, not the clip)
work=/root/mps-concurrent
ev=$work/evidence
rm -rf "$work" && mkdir -p "$ev" "$out"
stage() { echo "== $(date -u +%T) $*" | tee -a "$ev/stages.log"; }
pack() { tar -C "$ev" -czf "$out/mps_concurrent.tgz" . && echo "mps_concurrent: packed $(ls "$ev" | wc -l) files into $out/mps_concurrent.tgz"; }

stage "assets and kernels ($envs worlds)"
source_flag=()
[ -e resources/assets/cache/mjlab-1.6.0-py3-none-any.whl ] && source_flag=(--source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl)
python3 -m soaklab assets pull --robot g1 --clip "$clip" ${source_flag[@]+"${source_flag[@]}"} >"$ev/assets.log" 2>&1 || { cat "$ev/assets.log"; pack; exit 2; }
python3 scripts/gpu/warmup.py --worlds "$envs" --replays 5 --clip "$clip" --out "$ev/warmup.json" >"$ev/warmup.log" 2>&1 \
  || tail -5 "$ev/warmup.log"

stage "mps start"
python3 -m soaklab mps start >"$ev/mps.log" 2>&1 || { cat "$ev/mps.log"; pack; exit 2; }
cat "$ev/mps.log"
log_dir=$(python3 -c 'from soaklab.mps.ownership import live_records; print(live_records()[0].log_dir)' 2>>"$ev/mps.log")

stage "$n runs released together: $envs envs, $iterations iterations each"
go=$work/go
pids=()
for i in $(seq 1 "$n"); do
  (
    while [ ! -e "$go" ]; do sleep 0.005; done  # the barrier: all N leave it within a few milliseconds
    date -u +%s.%N >"$ev/run-$i.released"
    exec timeout --signal=INT --kill-after=30 "$limit" python3 -m soaklab train --algo flashsac \
      --task g1_motion_tracking --sim mjwarp --skip-post-training training.cuda_process_sharing=mps "algo.num_envs=$envs" \
      "algo.max_iterations=$iterations" "algo.save_interval=$iterations" "training.log_dir=$work/run-$i"
  ) >"$ev/run-$i.log" 2>&1 &
  pids+=($!)
done
sleep 2  # every waiter is polling before the release
touch "$go"
for i in $(seq 1 "$n"); do
  wait "${pids[$((i - 1))]}"
  echo $? >"$ev/run-$i.exit"
done
stage "all $n runs ended"
failed=0

for i in $(seq 1 "$n"); do
  cp "$work/run-$i/run_summary.json" "$ev/run-$i.run_summary.json" 2>/dev/null
  line=$(python3 - "$ev/run-$i.run_summary.json" "$(cat "$ev/run-$i.exit")" "$i" <<'EOF'
import json, sys
path, code, i = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    summary = json.load(open(path))
except (OSError, ValueError) as exc:
    print(f"run {i}: exit {code}, no run_summary.json ({type(exc).__name__}) FAIL")
    sys.exit(1)
status = summary.get("status")
manifest = summary.get("runtime_manifest") or {}
sharing = manifest.get("cuda_process_sharing") or {}
failure = (manifest.get("shutdown") or {}).get("classification")
ok = code == 0 and status == "completed" and sharing.get("effective") == "mps" and sharing.get("validated") is True
print(f"run {i}: exit {code}, status {status}, sharing {sharing.get('effective')} validated {sharing.get('validated')} "
      f"servers {sharing.get('server_pids')}, shutdown {failure} {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
EOF
  ) || failed=$((failed + 1))
  echo "$line" | tee -a "$ev/summary.txt"
done
[ -n "$log_dir" ] && cp "$log_dir"/*.log "$ev/" 2>/dev/null
# The loss_exploded rule's margin on these healthy G1 runs (docs/runtime.md, "Diverged runs").
python3 scripts/loss_margin.py "$work"/run-* >"$ev/loss_margin.txt" 2>&1 || true
tail -1 "$ev/loss_margin.txt"

stage "mps stop"
python3 -m soaklab mps stop >>"$ev/mps.log" 2>&1 || tail -2 "$ev/mps.log"
echo "mps_concurrent: $((n - failed)) of $n runs completed under one MPS daemon" | tee -a "$ev/summary.txt"
pack
[ "$failed" = 0 ]
