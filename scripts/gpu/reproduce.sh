#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, from a copy of the checkout): reproduce GPU records with
# the code of the visit and keep each passing reproduction in its record (the support matrix's
# Benchmarked evidence, records/<name>/machines/<kind>/reproduced.json).
#
#   OUT=/root/rep-out bash scripts/gpu/bootstrap.sh bash scripts/gpu/reproduce.sh
#
# REPRODUCE (default "gpu-soak-1024 gpu-learning"), one after the other under the CUDA MPS daemon:
# `snakemake reproduce --config reproduce=NAME`, then `soaklab record keep NAME`; after each, the
# comparisons, the kept reproductions and the run logs are packed into $OUT/reproduce.tgz, so what
# finished comes home even if a later one does not. The run's train logs are grepped for the
# resource tracker's "leaked semaphore" warning (issue 28). Start it detached and collect it like
# records.sh (scripts/gpu/README.md); collecting calls wait on /root/reproduce.pid.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
echo $$ >/root/reproduce.pid
here=$(pwd)
stage() { echo "== $(date -u +%T) $*"; }
printf 'assets:\n  source: %s\n' "$here/resources/assets/cache/mjlab-1.6.0-py3-none-any.whl" >/root/reproduce-assets.yaml
python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
  >/root/reproduce-assets.log 2>&1 || { cat /root/reproduce-assets.log; exit 2; }
python3 -m soaklab mps start >/root/reproduce-mps.log 2>&1 || { cat /root/reproduce-mps.log; exit 2; }
mkdir -p /root/reproduce-pack
for name in ${REPRODUCE:-gpu-soak-1024 gpu-learning}; do
  stage "reproduce $name"
  python3 -m snakemake reproduce --config "reproduce=$name" --cores 16 --scheduler greedy \
    --configfile /root/reproduce-assets.yaml >"/root/reproduce-pack/reproduce-$name.log" 2>&1
  echo "snakemake reproduce $name: exit $?"
  cat "results/reproduce/$name/verdict.txt" 2>/dev/null
  python3 -m soaklab record keep "$name" 2>&1 | tail -2
  echo "leaked-semaphore warnings in the runs' logs: $(grep -ro 'leaked semaphore' logs/rec-"$name"-seed* 2>/dev/null | wc -l)"
  mkdir -p "/root/reproduce-pack/$name"
  cp -a "results/reproduce/$name" "/root/reproduce-pack/$name/comparison" 2>/dev/null
  cp -a "records/$name/machines" "/root/reproduce-pack/$name/" 2>/dev/null
  cp -a logs/rec-"$name"-seed* "/root/reproduce-pack/$name/" 2>/dev/null
  tar -C /root/reproduce-pack -czf "$out/reproduce.tgz" . && stage "packed reproduce.tgz"
done
python3 -m soaklab mps stop >>/root/reproduce-mps.log 2>&1
stage "done"
rm -f /root/reproduce.pid
