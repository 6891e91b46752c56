"""G1 motion tracking's own resolution checks (the catalogue entry's `resolve`): a motion library's
shape and weights, and the scenes and clips a run will load, checked before anything is spawned.

Called by resolution (soaklab.config.run_config) with plain values: the composed config's mapping
and the asset manifest's record (soaklab.assets.record), or None where the run resolves without one.
Each refusal is one line naming the setting or file, the value and the fix.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soaklab.assets.record import resolved_motion, scene_of
from soaklab.contract.layout import block_sizes
from soaklab.errors import InvalidInput, SettingError
from soaklab.tasks.metrics import clip_labels


def check(config: Mapping[str, Any], assets: dict[str, Any] | None) -> None:
    """Every check of this task, on the composed `config` and the run's `assets` record."""
    env = config["env"]
    check_motion_library(env["motion"], env.get("motion_weights"), config["algo"]["num_envs"])
    check_asset_files(assets, env["motion"])


def check_motion_library(motion: Any, weights: Any, num_envs: int) -> None:
    """env.motion as a list: at least one env per clip, weights that give each clip an env, labels
    that tell clips apart. (A list on a task that does not track, or weights without a list, are
    refused by resolution itself.)"""
    if not isinstance(motion, list):
        return
    if num_envs < len(motion):
        raise SettingError("algo.num_envs", num_envs, f"must be >= the {len(motion)} clips of env.motion "
                           "(each clip tracks a block of envs)")
    if weights is not None:
        check_motion_weights(weights, len(motion), num_envs)
    labels = clip_labels(motion)
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise SettingError("env.motion", motion, f"two clips share the label {twice[0]!r} (a file's stem); "
                           "rename one of the files")


def check_motion_weights(weights: Any, clips: int, num_envs: int) -> None:
    """One positive, finite weight per clip, and at least one env in every clip's block."""
    fix = f"a list of {clips} positive numbers, one per clip of env.motion"
    if not isinstance(weights, list) or len(weights) != clips:
        raise SettingError("env.motion_weights", weights, f"must be {fix}")
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
            raise SettingError("env.motion_weights", weights, f"must be {fix} ({w!r} is not)")
    sizes = block_sizes(num_envs, clips, tuple(float(w) for w in weights))
    if min(sizes) < 1:
        raise SettingError("env.motion_weights", weights, f"gives a clip no env of algo.num_envs={num_envs} "
                           f"(blocks {sizes}); raise its weight or algo.num_envs")


def _unreadable(path: Path) -> str | None:
    """Why `path` cannot serve as an input file here, or None."""
    if not path.exists():
        return f"does not exist (looked for from {Path.cwd()})"
    if not path.is_file():
        return "is not a regular file"
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return None


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def check_asset_files(assets: dict[str, Any] | None, motion: Any) -> None:
    """The scenes and the clips a run will load exist, are files and can be read, and each clip is an
    NPZ archive of this robot: checked here, before anything is spawned, not found missing by the
    collector. A motion library's clips are checked one by one, each against its own scene."""
    if assets is None:
        for item in motion if isinstance(motion, list) else (motion,):
            check_clip_path_alone(item)
        return
    paths = resolved_motion(assets, motion)
    for item in paths if isinstance(paths, list) else (paths,):
        check_clip_file(assets, item, scene_of(assets, item) or assets["scene"])


def check_clip_file(assets: dict[str, Any], motion: str, scene_path: str) -> None:
    manifest = assets["manifest"]
    here = "a manifest's paths are relative to the folder its pull ran in: run from there, or pull again"
    scene = Path(scene_path)
    why = _unreadable(scene)
    if why:
        raise InvalidInput(f"{manifest}: its scene {scene} {why}; {here}")
    names = ", ".join(sorted(assets.get("motions", {})))
    own = motion in assets.get("motions", {}).values() or motion == assets["motion"]
    why = _unreadable(Path(motion))
    if why:
        where = f"{manifest}: its clip {motion}" if own else f"env.motion={motion}"
        fix = here if own else f"give an NPZ clip's path or a clip of the manifest ({names})"
        raise InvalidInput(f"{where} {why}; {fix}")
    if not zipfile.is_zipfile(motion):
        raise InvalidInput(f"env.motion={motion}: not an NPZ archive; give an NPZ clip's path or a clip of "
                           f"the manifest ({names})")
    # The collector's own checks of the scene and the clip against it (keys, shapes, body order), run
    # here: a clip that fails them would otherwise end the run as a collector that died at startup.
    from soaklab.assets.motion import load_motion
    from soaklab.assets.scene import load_scene

    try:
        model = load_scene(scene)
    except ValueError as exc:  # MuJoCo's XML errors
        raise InvalidInput(f"{manifest}: its scene {scene} does not load ({one_line(exc)}); pull again") from None
    try:
        load_motion(Path(motion), model)
    except InvalidInput as exc:
        why = str(exc).removeprefix(f"{motion}: ")
        raise InvalidInput(f"env.motion={motion}: {why}; give a clip of this robot or a clip of the manifest "
                           f"({names})") from None


def check_clip_path_alone(motion: str | None) -> None:
    """A configuration resolved without an asset manifest (no scene to check a clip against) still
    refuses an `env.motion` path that is missing, unreadable or not an NPZ archive: the record must
    not carry a clip that no run could load."""
    from soaklab.assets.clips import CLIP_CHOICES

    if motion is None or motion in CLIP_CHOICES:
        return
    why = _unreadable(Path(motion)) or (None if zipfile.is_zipfile(motion) else "is not an NPZ archive")
    if why:
        raise InvalidInput(f"env.motion={motion}: {why}; give an NPZ clip's path or a clip name "
                           f"({', '.join(CLIP_CHOICES)})")
