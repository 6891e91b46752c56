#!/usr/bin/env bash
# On the GPU machine, no GPU used: the CPU records reproduced on its host CPU (an Intel Xeon with
# AVX-512, 16 cores) from a fresh set-up, as `make setup && .venv/bin/snakemake reproduce` would on a
# CPU machine, under each record's numerics profile (docs/records.md). The staged parts
# (stage_cpu.sh) lie in /root/stage, the pinned asset wheels in /root/cache; results come back in
# $OUT/cpu-reproduce.tgz.
#
#   RECORDS=ci-dag,cpu-g1-soak bash scripts/gpu/cpu_reproduce.sh
#   UPDATE=1 ...           first write each record's set of this machine kind (soaklab record update),
#                          brought back in $OUT/cpu-records.tgz
#   RECORD_OVERRIDES='{algo.critic_lr: 0.000309}' ...   an A/B of one change against the records
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/soaklab-out}
mkdir -p "$out" resources/assets/cache
(cd /root/stage && sha256sum -c --quiet SUMS) || { echo "cpu_reproduce: a staged part is missing or damaged" >&2; exit 2; }
if [ ! -x /root/cpu-venv/bin/python ]; then
  cat /root/stage/cpu.tar.part.* | tar -C /root/stage -xf -
  python_home=$(cat /root/stage/python_home)
  mkdir -p "$(dirname "$python_home")" && tar -C "$(dirname "$python_home")" -xzf /root/stage/py311.tar.gz
  "$python_home/bin/python3.11" -m venv /root/cpu-venv
  /root/cpu-venv/bin/python -m pip install --quiet --no-index --no-deps /root/stage/wheels/*.whl
fi
/root/cpu-venv/bin/python -m pip install --quiet --no-index --no-deps --no-build-isolation -e . >/dev/null
rm -rf .venv && ln -s /root/cpu-venv .venv
cp /root/cache/*.whl resources/assets/cache/ 2>/dev/null || true
{
  echo "== host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x$(nproc)"
  .venv/bin/python -c 'import torch, mujoco, sys; print("== torch", torch.__version__, torch.backends.cpu.get_cpu_capability(), "mujoco", mujoco.__version__, "python", sys.version.split()[0])'
  if [ -n "${UPDATE:-}" ]; then
    for record in ${RECORDS//,/ }; do SOAKLAB_OFFLINE=1 .venv/bin/soaklab record update "$record" --cores "${CORES:-4}"; done
    tar -czf "$out/cpu-records.tgz" records/*/machines/cpu-*intel*
  fi
  config=(--config "reproduce=${RECORDS:-ci-dag,cpu-g1-soak}")
  [ -n "${RECORD_OVERRIDES:-}" ] && config+=("record_overrides=${RECORD_OVERRIDES}")
  SOAKLAB_OFFLINE=1 .venv/bin/snakemake reproduce --keep-going --cores "${CORES:-4}" "${config[@]}"
  echo "== snakemake exit $?"
  for c in results/reproduce/*/comparison.json; do .venv/bin/python -m soaklab record verdict "$c" --out /dev/null; done
} 2>&1 | tee "$out/cpu-reproduce.log"
tar -czf "$out/cpu-reproduce.tgz" results/reproduce logs benchmarks/rules $(ls -d results/rec-*/soak.json results/rec-*/validation.json results/rec-*/run_config.json 2>/dev/null)
