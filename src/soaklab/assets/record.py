"""The asset manifest as a run records it (run_config.json's `run.assets`), and what a run reads back
from that record: the clip a motion name resolves to, and the scene each clip loads."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import loads_checked

MotionValue = str | list[str] | tuple[str, ...] | None  # env.motion: a clip, a motion library, or the default


def assets_record(manifest_path: Path | None) -> dict[str, Any] | None:
    """Where the scene and motion of an asset manifest lie, and the manifest's hash."""
    if manifest_path is None:
        return None
    try:
        raw = manifest_path.read_bytes()
        manifest = loads_checked(raw, str(manifest_path))
        return {
            "manifest": str(manifest_path),
            "manifest_sha256": hashlib.sha256(raw).hexdigest(),
            "scene": manifest["scene"]["path"],
            "motion": manifest["motion"]["path"],
            "motions": {name: clip["path"] for name, clip in manifest.get("motions", {}).items()},
            # Clip path -> its own scene, for clips that bring one (a terrain): runs tracking them load it.
            "scenes": {clip["path"]: clip["scene"]["path"] for clip in manifest.get("motions", {}).values()
                       if "scene" in clip},
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(
            f"{manifest_path}: not a readable asset manifest ({exc}); run `soaklab assets pull`"
        ) from None


def resolved_motion(assets: dict[str, Any], motion: MotionValue) -> str | list[str]:
    """env.motion as paths: null = the manifest's default clip; a clip name of the manifest = that
    clip; else a path. A motion library's clips are resolved alike, each."""
    clips = assets.get("motions", {})
    if isinstance(motion, list | tuple):
        return [clips.get(m, m) for m in motion]
    return assets["motion"] if motion is None else clips.get(motion, motion)


def scene_of(assets: dict[str, Any] | None, motion: str | None) -> str | None:
    """The scene a run tracking the clip at `motion` loads (an assets record, as run_config.json
    keeps it): that clip's own scene if it brings one (its terrain), else the manifest's scene."""
    if not assets:
        return None
    return assets.get("scenes", {}).get(motion, assets["scene"])


def scene_for_env(assets: dict[str, Any] | None, motion: MotionValue) -> str | dict[str, str] | None:
    """What make_env takes as `scene`: one clip's scene, or each clip path's scene (a motion library)."""
    if isinstance(motion, list | tuple):
        return {m: s for m in motion if (s := scene_of(assets, m)) is not None} if assets else None
    return scene_of(assets, motion)
