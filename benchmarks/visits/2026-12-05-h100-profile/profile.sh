#!/usr/bin/env bash
# On the GPU machine (through bootstrap.sh): where the G1 env step's time goes, at 1024 and 4096
# envs (issue 49's starting profile), with today's phase times and raw ceilings beside it.
#
#   OUT=/root/profile-out bash scripts/gpu/bootstrap.sh bash benchmarks/visits/2026-12-05-h100-profile/profile.sh
#
# For each size in SIZES (default "1024 4096"):
# - `soaklab bench backend --backends mjwarp`: the phases timed with CUDA events (no synchronisation),
#   the raw ceiling replayed from the env's own states and the free-running one, in the same run, and
#   that ceiling again under each physics option variant in VARIANTS (mujoco_warp overrides; at the
#   sizes in VARIANT_SIZES, default 1024: each new solver or broadphase compiles its kernels once);
# - `python benchmarks/visits/2026-12-05-h100-profile/env_profile.py`: the kernel census of each phase under the torch profiler.
# Everything packs into $OUT/profile.tgz after each size, so a visit cut short keeps what finished.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
logs=/root/profile-logs
rm -rf "$logs" && mkdir -p "$logs"
stage() { echo "== $(date -u +%T) $*"; }
pack() { tar -C "$logs" -czf "$out/profile.tgz" . && stage "packed profile.tgz"; }
python3 -m soaklab assets pull --robot g1 --source resources/assets/cache/mjlab-1.6.0-py3-none-any.whl \
  >"$logs/assets.log" 2>&1 || { cat "$logs/assets.log"; exit 2; }
variants="opt.run_qacc_smooth=false;opt.broadphase=SAP_TILE;opt.solver=CG;opt.ls_iterations=10;opt.tolerance=1e-5;\
opt.graph_conditional=false,opt.iterations=10"
for n in ${SIZES:-1024 4096}; do
  stage "the env alone at $n envs: phases and ceilings"
  case " ${VARIANT_SIZES:-1024} " in *" $n "*) v=${VARIANTS-$variants} ;; *) v= ;; esac
  python3 -m soaklab bench backend --backends mjwarp --num-envs "$n" --warmup 20 --iters 100 \
    --physics-variants "$v" --output "$logs/backend_$n.json" >"$logs/backend_$n.log" 2>&1 || tail -3 "$logs/backend_$n.log"
  stage "the kernel census at $n envs"
  python3 benchmarks/visits/2026-12-05-h100-profile/env_profile.py --num-envs "$n" --steps "${STEPS:-30}" --output "$logs/profile_$n.json" \
    2>&1 | tee "$logs/profile_$n.log" | grep env_profile
  pack
done
stage "done"
