#!/usr/bin/env bash
# Here, after a GPU visit: keep the kernel cache it packed (files_at of the run) for the next visit.
#   bash scripts/gpu/keep-cache.sh <files_at>
set -euo pipefail
src=${1:?usage: keep-cache.sh <folder holding warpcache.tgz.part.*>}
root=$(git rev-parse --show-toplevel)
parts=$(find "$src" -name 'warpcache.tgz.part.*' | sort)
[ -n "$parts" ] || { echo "keep-cache: no warpcache.tgz.part.* under $src" >&2; exit 2; }
rm -rf "$root/.device/warpcache" && mkdir -p "$root/.device/warpcache"
for p in $parts; do cp "$p" "$root/.device/warpcache/"; done
du -sh "$root/.device/warpcache"
