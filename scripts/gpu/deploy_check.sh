#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, from a copy of the checkout, both pinned wheels in
# resources/assets/cache/): issue 70's GPU acceptance in one visit.
#
#   OUT=/root/dc-out bash scripts/gpu/bootstrap.sh bash scripts/gpu/deploy_check.sh
#
# 1. the mujoco_warp kernels compiled once (scripts/gpu/warmup.py), the assets pulled;
# 2. a G1 motion-library run (FlashSAC on MJWarp, env.motion=[largebox,crawl_slope], each clip on its
#    own scene) trained for MINUTES (default 10) of wall clock (training.max_wall_minutes);
# 3. its final checkpoint exported (`soaklab export`: policy.onnx with its contract), then judged from
#    the file alone (`soaklab deploy-check`, plain MuJoCo on the CPU, EPISODES per clip, default 64)
#    and by `soaklab evaluate --sim mujoco` (the same episodes and seed), side by side in
#    compare.json: each figure of each clip from both, and their differences.
# Each stage packs what is done into $OUT/deploy_check.tgz. It outlasts one device command: start it
# detached and collect it with calls that follow each other, each waiting on /root/deploy_check.pid
# (scripts/gpu/README.md).
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
echo $$ >/root/deploy_check.pid
work=/root/deploy-check-work
logs=$work/evidence
minutes=${MINUTES:-10}
episodes=${EPISODES:-64}
rm -rf "$work" && mkdir -p "$logs"
stage() { echo "== $(date -u +%T) $*"; tar -C "$logs" -czf "$out/deploy_check.tgz" .; }

python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
  >"$logs/assets.log" 2>&1 || { cat "$logs/assets.log"; rm -f /root/deploy_check.pid; exit 2; }
stage "warm-up: compile mujoco_warp's kernels"
python3 scripts/gpu/warmup.py --worlds 1024 --out "$logs/ceiling.json" >"$logs/warmup.log" 2>&1 || tail -5 "$logs/warmup.log"

stage "train a G1 library run, $minutes minutes"
python3 scripts/gpu/g1_learning.py run --algo flashsac --sim mjwarp --minutes "$minutes" --label library \
  --out "$logs" --keep-log --keep-run "$work/run" algo.num_envs=1024 "env.motion=[largebox,crawl_slope]" \
  >"$logs/library.bench.log" 2>&1
echo "train: exit $?"; tail -1 "$logs/library.bench.log"
cp "$work/run/run_summary.json" "$work/run/run_config.json" "$logs/" 2>/dev/null

stage "export with the contract"
python3 -m soaklab export "$work/run" --out "$work/policy.onnx" >"$logs/export.log" 2>&1
echo "export: exit $?"; tail -1 "$logs/export.log"
cp "$work/policy.contract.json" "$work/policy.parity.json" "$logs/" 2>/dev/null  # the model stays (its size)

stage "deploy-check from the file alone and evaluate, $episodes episodes per clip, on MuJoCo"
python3 -m soaklab deploy-check "$work/policy.onnx" --episodes "$episodes" --out "$logs/deploy-check.json" \
  >"$logs/deploy-check.log" 2>&1 &
python3 -m soaklab evaluate "$work/run" --sim mujoco --episodes "$episodes" --out "$logs/evaluation-mujoco.json" \
  >"$logs/evaluate.log" 2>&1 &
wait
tail -n 2 "$logs/deploy-check.log" "$logs/evaluate.log"
python3 - "$logs" <<'PY'
import json, sys
from pathlib import Path
logs = Path(sys.argv[1])
check = json.loads((logs / "deploy-check.json").read_text())
evaluation = json.loads((logs / "evaluation-mujoco.json").read_text())
rows = {}
for clip, theirs in evaluation["clips"].items():
    ours = check["clips"][clip]
    rows[clip] = {name: {"deploy_check": ours[name], "evaluate": theirs[name], "difference": ours[name] - theirs[name]}
                  for name in ("episodes", "success_rate", "tracked_fraction", "mpkpe_m", "root_relative_mpkpe_m",
                               "joint_error_rad", "steps")}
    print(clip, {k: (v["deploy_check"], v["evaluate"]) for k, v in rows[clip].items()})
(logs / "compare.json").write_text(json.dumps({"seed": check["seed"], "probe": check["probe"],
                                               "contract": check["contract"], "clips": rows}, indent=2))
PY
stage "done"
rm -f /root/deploy_check.pid
