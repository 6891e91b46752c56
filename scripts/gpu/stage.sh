#!/usr/bin/env bash
# Here, before a GPU visit: stage the wheels the GPU machine lacks into .device/ (git-ignored).
# warp-lang lands in 30 MiB parts (.device/parts/): each device call sends the checkout (about 8 MiB)
# beside what it carries, under 64 MiB in all, and the tool's 56 MiB parts no longer fit beside it
# (2026-12-02). pulp (Snakemake's ILP scheduler, unused with --cores 1) is dropped so wheels + pinned
# asset wheel + kernel cache fit one 64 MiB transfer.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
# The staging tool is the workplace's (it knows its wheel store); point STAGE_WHEELS at it.
: "${STAGE_WHEELS:?set STAGE_WHEELS to the stage-wheels tool of the workplace}"
"$STAGE_WHEELS" --with-snakemake "$@"
rm -f .device/wheels/pulp-*.whl
# Re-split each wheel's parts into 30 MiB ones; install.sh joins `<wheel>.part.*` in name order.
for sum in .device/sums/*.sha256; do
  wheel=.device/parts/$(basename "${sum%.sha256}")
  parts=("$wheel".part.*)
  [ -e "${parts[0]}" ] || continue
  cat "${parts[@]}" >"$wheel.joined" && rm -f "${parts[@]}"
  split -b 30M -d -a 2 "$wheel.joined" "$wheel.part." && rm -f "$wheel.joined"
done
du -sh .device/wheels .device/parts .device/warpcache 2>/dev/null || true
