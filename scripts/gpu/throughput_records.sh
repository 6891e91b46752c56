#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh, from a copy of the checkout, detached like records.sh;
# collecting calls wait on /root/throughput.pid): what a change to the one-GPU runtime moves, in one
# visit (issue 29).
#
#   OUT=/root/thr-out bash scripts/gpu/bootstrap.sh bash scripts/gpu/throughput_records.sh
#
# 1. records.sh with RECORDS (default gpu-soak-1024 gpu-throughput-4096), LEARNING=0, EVALUATE=0:
#    the warm-up (the raw ceiling, ceiling.json), then each throughput record rewritten from three
#    fresh seeds of today's code (`soaklab record update`, which prints the diff), throughput.tgz;
# 2. the env alone (`soaklab bench backend --backends mjwarp`) at 1024 and 4096 envs, the ceiling
#    the runs are judged against, measured in the same visit, with the raw ceiling again at each
#    solver iteration limit in SOLVER_CAPS (default 5,10,25; empty for none): probe.tgz;
# 3. reproduce.sh with REPRODUCE (default gpu-learning; empty for none): the learning record's three
#    seeds on today's code, compared with the record (the A/B that says learning is no worse) and
#    kept when it passes: reproduce.tgz.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
echo $$ >/root/throughput.pid
here=$(pwd)
stage() { echo "== $(date -u +%T) $*"; }

RECORDS=${RECORDS-gpu-soak-1024 gpu-throughput-4096} LEARNING=0 EVALUATE=0 bash scripts/gpu/records.sh

stage "the env alone at ${SIZES:-1024 4096} envs"
mkdir -p /root/probe-pack
for n in ${SIZES:-1024 4096}; do
  python3 -m soaklab bench backend --backends mjwarp --num-envs "$n" --warmup 20 --iters 100 \
    --solver-caps "${SOLVER_CAPS-5,10,25}" --output "/root/probe-pack/backend_$n.json" >"/root/probe-pack/backend_$n.log" 2>&1; echo "probe $n: exit $?"
  tail -1 "/root/probe-pack/backend_$n.log"
done
tar -C /root/probe-pack -czf "$out/probe.tgz" . && stage "packed probe.tgz"

if [ -n "${REPRODUCE-gpu-learning}" ]; then
  cd "$here" && REPRODUCE=${REPRODUCE-gpu-learning} bash scripts/gpu/reproduce.sh
fi
stage "visit done"
rm -f /root/throughput.pid
