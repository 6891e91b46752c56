#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, with both pinned wheels in resources/assets/cache/): the
# motion library and crawl_slope's terrain on MuJoCo Warp, briefly. It runs the collector-stream
# priority test, a short FlashSAC run over [largebox, crawl_slope] (each block on its own scene) and
# its evaluation on MJWarp and, sim-to-sim, on MuJoCo. Logs and JSON land in $OUT/library-smoke.tgz.
#
#   bash scripts/gpu/bootstrap.sh bash benchmarks/visits/2026-12-02-h200-library/library_smoke.sh      # about 3 minutes
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
logs=$(mktemp -d)
status=0
stage() { echo "== $(date -u +%T) $*"; tar -C "$logs" -czf "$out/library-smoke.tgz" .; }  # packs what is done
python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
  >"$logs/assets.log" 2>&1 || { cat "$logs/assets.log"; exit 2; }
stage "the stream priority test"
python3 -m pytest -q -p no:cacheprovider tests/sim/test_mjwarp.py -k priority >"$logs/pytest.log" 2>&1 || status=1
tail -2 "$logs/pytest.log"
run=/tmp/library-smoke
rm -rf "$run"
stage "train: env.motion=[largebox,crawl_slope] on mjwarp"
python3 -m soaklab train --algo flashsac --task g1_motion_tracking --sim mjwarp --skip-post-training \
  "env.motion=[largebox,crawl_slope]" algo.num_envs="${ENVS:-256}" algo.max_iterations="${ITERATIONS:-200}" \
  algo.save_interval=100000 "training.log_dir=$run" >"$logs/train.log" 2>&1 || status=1
tail -2 "$logs/train.log"
cp "$run"/run_summary.json "$run"/backend_diagnostics.json "$logs/" 2>/dev/null
for sim in mjwarp mujoco; do
  stage "evaluate on $sim"
  python3 -m soaklab evaluate "$run" --sim "$sim" --episodes "$([ "$sim" = mjwarp ] && echo 256 || echo 16)" \
    --out "$logs/evaluation-$sim.json" >"$logs/evaluate-$sim.log" 2>&1 || status=1
  tail -2 "$logs/evaluate-$sim.log"
done
tar -C "$logs" -czf "$out/library-smoke.tgz" .
exit $status
