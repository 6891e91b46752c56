#!/usr/bin/env bash
# Here, before a GPU visit for issue 68's point on the public curve: mujoco_warp's own unitree_g1
# benchmark (its scene, model and control replay) taken from a mujoco_warp git repository into
# .device/mjw_g1/ (git-ignored: upstream's files travel with the visit and are not committed), with
# where they came from. Its meshes are visual only (density 0, contype 0) and not in that folder of
# upstream (it fetches them from mujoco_menagerie): scripts/gpu/mjw_g1.sh takes the 35 files of the
# same names from the pinned mjlab wheel on the GPU machine.
#
#   bash scripts/gpu/stage_mjw_g1.sh GIT_DIR [REF]      (REF: default HEAD)
#
# It also adds absl-py to .device/wheels (testspeed's flags). Then carry .device/mjw_g1 in the visit's
# work call (scripts/gpu/README.md).
set -euo pipefail
git_dir=${1:?usage: stage_mjw_g1.sh GIT_DIR [REF] (a mujoco_warp clone or mirror)}
ref=${2:-HEAD}
root=$(git rev-parse --show-toplevel)
dest=$root/.device/mjw_g1
commit=$(git --git-dir "$git_dir" rev-parse --verify "$ref^{commit}") \
  || { echo "stage_mjw_g1: $git_dir has no commit $ref" >&2; exit 2; }
files=(scene_flat.xml unitree_g1_mjlab.xml shuffle_dance.npz __init__.py)
rm -rf "$dest" && mkdir -p "$dest"
for f in "${files[@]}"; do
  git --git-dir "$git_dir" show "$commit:benchmarks/unitree_g1/$f" >"$dest/$f" \
    || { echo "stage_mjw_g1: $ref has no benchmarks/unitree_g1/$f" >&2; exit 2; }
done
{
  echo "{\"repository\": \"google-deepmind/mujoco_warp\", \"commit\": \"$commit\","
  echo " \"date\": \"$(git --git-dir "$git_dir" log -1 --format=%cI "$commit")\","
  echo " \"version\": \"$(git --git-dir "$git_dir" show "$commit:pyproject.toml" | sed -n 's/^version = "\(.*\)"/\1/p' | head -1)\","
  echo " \"sha256\": {"
  for f in "${files[@]}"; do
    sep=,; [ "$f" = "${files[-1]}" ] && sep=
    echo "   \"$f\": \"$(sha256sum "$dest/$f" | cut -d' ' -f1)\"$sep"
  done
  echo " }}"
} >"$dest/SOURCE.json"
python3 -m json.tool "$dest/SOURCE.json" >/dev/null
# testspeed's command line is absl's (mujoco_warp lists it for its tools only): into the staged wheels
ls "$root"/.device/wheels/absl_py-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --platform any absl-py -d "$root/.device/wheels"
du -sh "$dest"; ls "$root"/.device/wheels/absl_py-*.whl
