#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh): every test marked `gpu` (the ones CI skips), with the
# pinned wheels in resources/assets/cache so the G1 fixtures need no index. The log goes to $OUT.
#
#   bash scripts/gpu/bootstrap.sh bash scripts/gpu/gpu_tests.sh
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
python3 -m pytest -q -rs -p no:cacheprovider -m gpu tests >"$out/gpu-tests.log" 2>&1
status=$?
tail -12 "$out/gpu-tests.log"
exit $status
