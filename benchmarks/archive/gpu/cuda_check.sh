#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh): the CUDA-carrier and MPS tests, then a throughput
# measurement of the canonical run (FlashSAC, G1, MJWarp, 1024 envs, MPS) to size gpu-short.yaml.
#
#   bash scripts/gpu/bootstrap.sh bash benchmarks/archive/gpu/cuda_check.sh
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
iterations=${ITERATIONS:-1500}  # 0: the tests only
python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl >"$out/assets.log" 2>&1
python3 -m pytest -q -s -p no:cacheprovider tests/rl/test_cuda_runtime.py tests/mps/test_daemon_gpu.py \
  >"$out/gpu-tests.log" 2>&1
tests=$?
tail -5 "$out/gpu-tests.log"
[ "$iterations" = 0 ] && exit $tests
python3 -m soaklab mps start
rm -rf /tmp/measure
python3 -m soaklab train --algo flashsac --task g1_motion_tracking --sim mjwarp \
  training.cuda_process_sharing=mps algo.num_envs=1024 "algo.max_iterations=$iterations" \
  training.log_dir=/tmp/measure >"$out/measure.log" 2>&1
measure=$?
tail -4 "$out/measure.log"
cp /tmp/measure/run_summary.json "$out/measure_run_summary.json" 2>/dev/null
python3 -m soaklab metrics /tmp/measure --out "$out/measure_metrics.json" --last 200 \
  >/dev/null 2>&1 || true
python3 -m soaklab mps stop
echo "tests exit $tests, measure exit $measure"
exit $(( tests || measure ))
