#!/usr/bin/env bash
# Here, before a GPU visit: stage the wheels the GPU machine lacks into .device/ (git-ignored).
# warp-lang lands in three 56 MiB parts (.device/parts/); pulp (Snakemake's ILP scheduler, unused
# with --cores 1) is dropped so wheels + pinned asset wheel + kernel cache fit one 64 MiB transfer.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
# The staging tool is the workplace's (it knows its wheel store); point STAGE_WHEELS at it.
: "${STAGE_WHEELS:?set STAGE_WHEELS to the stage-wheels tool of the workplace}"
"$STAGE_WHEELS" --with-snakemake "$@"
rm -f .device/wheels/pulp-*.whl
du -sh .device/wheels .device/parts .device/warpcache 2>/dev/null || true
