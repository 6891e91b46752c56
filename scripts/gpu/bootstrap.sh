#!/usr/bin/env bash
# On the GPU machine: install the staged wheels, restore a carried warp kernel cache, run a
# command, and as the last step pack the kernel cache into the output folder ($OUT), so the next
# visit skips the ~4.5-minute first compile of mujoco_warp's kernels.
#
#   bash scripts/gpu/bootstrap.sh python3 -m soaklab bench backend --backends mujoco,mjwarp ...
#
# Staging (here, before the visit) and bringing the cache home: scripts/gpu/README.md.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
out=${OUT:-/tmp/soaklab-out}
mkdir -p "$out"

# Installed once per machine: a later call on the same warm machine (or a script started beside a
# running one) skips pip, which must never run twice into /root/site at the same time.
stamp=$( (cat .device/install.sh .device/sums/*; ls .device/wheels) | sha256sum | cut -c1-16)
exec 9>/root/.soaklab-install.lock && flock 9  # a second bootstrap waits for the first one's install
if [ "$(cat /root/site/.soaklab-installed 2>/dev/null)" = "$stamp" ]; then
  echo "bootstrap: the staged wheels are installed already ($stamp)"
else
  bash .device/install.sh >"$out/install.log" 2>&1 || { cat "$out/install.log"; echo "bootstrap: install failed" >&2; exit 2; }
  echo "$stamp" >/root/site/.soaklab-installed
fi
flock -u 9
export PYTHONPATH=/root/site:$here/src
export PATH=/root/site/bin:$PATH
# soaklab runs from the checkout's src/ (not installed): the README's `soaklab ...` lines need a command.
mkdir -p /root/site/bin
command -v soaklab >/dev/null || printf '#!/bin/sh\nexec python3 -m soaklab "$@"\n' >/root/site/bin/soaklab
chmod +x /root/site/bin/soaklab 2>/dev/null || true

cache_parts=(.device/warpcache/warpcache.tgz.part.*)
if [ -d ~/.cache/warp ]; then  # this machine's own, a superset of the carried one (and maybe in use)
  echo "bootstrap: the warp kernel cache of an earlier call on this machine stays"
elif [ -e "${cache_parts[0]}" ]; then
  mkdir -p ~/.cache
  cat "${cache_parts[@]}" | tar -C ~/.cache -xzf - && echo "bootstrap: restored the warp kernel cache (${#cache_parts[@]} parts)"
else
  echo "bootstrap: no carried warp kernel cache; the first mujoco_warp import compiles (~4.5 min)"
fi

status=0
"$@" || status=$?

# Last step whatever the command did: 15 MiB parts fit the output folder's per-file limit.
if [ -d ~/.cache/warp ]; then
  tar -C ~/.cache -czf - warp | split -b 15M -d - "$out/warpcache.tgz.part."
  echo "bootstrap: packed the warp kernel cache into $(ls "$out"/warpcache.tgz.part.* | wc -l) parts"
fi
exit $status
