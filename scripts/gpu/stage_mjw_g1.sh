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
commit=$(git --git-dir "$git_dir" rev-parse --verify --quiet "$ref^{commit}" 2>/dev/null) \
  || { echo "stage_mjw_g1: $git_dir has no commit $ref" >&2; exit 2; }
files=(scene_flat.xml unitree_g1_mjlab.xml shuffle_dance.npz __init__.py)
# staged beside the folder and swapped in whole: a ref that lacks a file leaves the last staging as it was
new=$dest.new
rm -rf "$new" && mkdir -p "$new"
for f in "${files[@]}"; do
  git --git-dir "$git_dir" show "$commit:benchmarks/unitree_g1/$f" >"$new/$f" 2>/dev/null \
    || { rm -rf "$new"; echo "stage_mjw_g1: $ref has no benchmarks/unitree_g1/$f" >&2; exit 2; }
done
date=$(git --git-dir "$git_dir" log -1 --format=%cI "$commit")
version=$(git --git-dir "$git_dir" show "$commit:pyproject.toml" 2>/dev/null | sed -n 's/^version = "\(.*\)"/\1/p' | head -1 || true)
# json.dumps: whatever the repository's version line holds, SOURCE.json stays JSON
python3 - "$new" "$commit" "$date" "$version" "${files[@]}" <<'PY'
import hashlib, json, pathlib, sys
new, commit, date, version, *files = sys.argv[1:]
sums = {f: hashlib.sha256((pathlib.Path(new) / f).read_bytes()).hexdigest() for f in files}
(pathlib.Path(new) / "SOURCE.json").write_text(json.dumps(
    {"repository": "google-deepmind/mujoco_warp", "commit": commit, "date": date, "version": version,
     "sha256": sums}, indent=1) + "\n")
PY
rm -rf "$dest" && mv "$new" "$dest"
# testspeed's command line is absl's (mujoco_warp lists it for its tools only): into the staged wheels
ls "$root"/.device/wheels/absl_py-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --platform any absl-py -d "$root/.device/wheels"
du -sh "$dest"; ls "$root"/.device/wheels/absl_py-*.whl
