"""`soaklab assets pull`: materialize the G1 scene and motion clip, and write the manifest.

A pull whose manifest already verifies changes nothing. Anything new is built
in a staging folder and swapped in only once complete, so a failed pull never
leaves half a tree behind.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco

from soaklab.assets import motion as motion_mod
from soaklab.assets import scene as scene_mod
from soaklab.assets.clips import CLIP_CHOICES, DEFAULT_CLIP, PUBLISHED_CLIPS, SYNTHETIC, convert_by_name, read_member
from soaklab.assets.source import (
    G1_WHEEL,
    ROBOT_XML,
    copy_directory_source,
    extract_subtree,
    fetch_pinned_wheel,
    offline,
    wheel_license,
)
from soaklab.assets.terrain import terrain_pieces, write_terrain_scene
from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import read_json, sha256_file, write_json_atomic
from soaklab.files.locks import exclusive
from soaklab.schemas import load_artifact, validate_artifact

MANIFEST_SCHEMA_VERSION = 3  # 3: every clip of the clip wheel, terrain clips with their scene
EXPECTED_DIMS = {"nq": 36, "nv": 35, "nu": 29}
ROBOTS = ("g1",)


@dataclass(frozen=True)
class PullRequest:
    robot: str
    source: str | None
    motion: Path | None
    dest: Path
    manifest: Path
    repair: bool = False
    clip: str = DEFAULT_CLIP  # the default reference: a published clip's name or `synthetic`
    clip_wheel: Path | None = None  # a local copy of the clip's wheel (air-gapped hosts)

    @property
    def robot_dir(self) -> Path:
        return self.dest / self.robot

    @property
    def cache_dir(self) -> Path:
        return self.dest / "cache"

    def source_spec(self) -> str:
        return self.source if self.source is not None else G1_WHEEL.requirement


def file_record(path: Path) -> dict[str, Any]:
    return {"path": str(path), "bytes": path.stat().st_size, "sha256": sha256_file(path)}


def manifest_problems(manifest: dict[str, Any]) -> list[str]:
    """One line per missing or corrupted file of a manifest (empty when all verify)."""
    motions = manifest["motions"].values()
    entries = [*manifest["files"], manifest["scene"], *motions,
               *(clip[key] for clip in motions for key in ("terrain", "scene") if key in clip)]
    problems = []
    for entry in entries:
        path = Path(entry["path"])
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif (digest := sha256_file(path)) != entry["sha256"]:
            problems.append(f"{path}: corrupted (sha256 {digest[:12]}..., manifest says {entry['sha256'][:12]}...)")
    return problems


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest at `path`; None when there is none or it is an older layout (pulled again)."""
    if not path.is_file():
        return None
    try:
        version = read_json(path).get("schema_version")
    except (OSError, ValueError, AttributeError):
        version = MANIFEST_SCHEMA_VERSION  # let the validator name what is wrong
    if isinstance(version, int) and version < MANIFEST_SCHEMA_VERSION:
        print(f"assets: {path} is schema version {version}; pulling again for version {MANIFEST_SCHEMA_VERSION}")
        return None
    return load_artifact("assets_manifest", path, "delete it and pull again")


def clip_name(req: PullRequest) -> str:
    return "custom" if req.motion is not None else req.clip


def same_request(manifest: dict[str, Any], req: PullRequest) -> bool:
    wanted_motion = str(req.motion) if req.motion else None
    motion = manifest["motion"]
    return (manifest["source"]["spec"] == req.source_spec() and motion.get("origin") == wanted_motion
            and motion.get("clip") == clip_name(req))


def materialize_clips(req: PullRequest, model: mujoco.MjModel, motion_dir: Path
                      ) -> tuple[str, dict[str, tuple[Path, motion_mod.MotionClip, dict[str, Any]]]]:
    """Write the synthetic clip (always: offline tests use it) and the default one into
    `motion_dir`; return the default's name and {name: (file, clip, provenance)}."""
    motion_dir.mkdir(parents=True, exist_ok=True)
    clips: dict[str, tuple[Path, motion_mod.MotionClip, dict[str, Any]]] = {}
    synthetic = motion_mod.generate_synthetic_clip(model)
    path = motion_dir / motion_mod.SYNTHETIC_NAME
    motion_mod.save_motion(synthetic, path)
    clips[SYNTHETIC] = (path, motion_mod.load_motion(path, model),  # the real validator checks it too
                        {"generator": {"seed": motion_mod.SYNTHETIC_SEED,
                                       "duration_s": motion_mod.SYNTHETIC_DURATION_S}})
    name = clip_name(req)
    if req.motion is not None:
        clip = motion_mod.load_motion(req.motion, model)
        path = motion_dir / f"custom-{req.motion.name}"
        shutil.copyfile(req.motion, path)
        clips[name] = (path, clip, {"origin": str(req.motion)})
    elif name in PUBLISHED_CLIPS:
        chosen = PUBLISHED_CLIPS[name]
        fix = f"pass --clip-wheel {chosen.wheel.filename} or --clip {SYNTHETIC}"
        wheel = req.clip_wheel or fetch_pinned_wheel(chosen.wheel, req.cache_dir, fix=fix)
        if not wheel.is_file():
            raise InvalidInput(f"--clip-wheel {wheel}: no such file")
        digest = sha256_file(wheel)
        # Every clip the same wheel publishes (env.motion may name any of them, or a list of them).
        for published in (p for p in PUBLISHED_CLIPS.values() if p.wheel == chosen.wheel):
            converted = convert_by_name(read_member(wheel, published), f"{wheel}:{published.archive_name}", model)
            path = motion_dir / published.file_name
            motion_mod.save_motion(converted, path)
            provenance: dict[str, Any] = {"wheel": {
                "spec": published.wheel.requirement, "sha256": digest, "member": published.archive_name,
                "kind": "pinned_wheel" if digest == published.wheel.sha256 else "wheel",
                "license": wheel_license(wheel)}}
            if published.terrain_archive_name is not None:
                provenance["terrain"] = materialize_terrain(wheel, published, motion_dir)
            clips[published.name] = (path, motion_mod.load_motion(path, model), provenance)
    elif name != SYNTHETIC:
        raise InvalidInput(f"--clip {name}: unknown clip; valid: {', '.join(CLIP_CHOICES)}")
    return name, clips


def materialize_terrain(wheel: Path, clip: Any, motion_dir: Path) -> dict[str, Any]:
    """The clip's terrain OBJ (kept as published) and its scene, `scene_<clip>.xml` beside scene.xml;
    returns their staging paths and what the manifest records of them."""
    member = clip.terrain_archive_name
    raw = read_member(wheel, clip, member)
    pieces = terrain_pieces(raw, f"{wheel}:{member}")
    obj = motion_dir / f"{clip.name}_terrain.obj"
    obj.write_bytes(raw)
    scene = write_terrain_scene(motion_dir.parent / ROBOT_XML, clip.name, pieces)
    check_scene(scene_mod.load_scene(scene), scene)
    return {"member": member, "pieces": len(pieces), "obj": obj, "scene": scene}


def materialize_robot(req: PullRequest, staging: Path) -> dict[str, Any]:
    """Put the robot's files into `staging`; return the manifest's source record."""
    spec = req.source_spec()
    if req.source is None:
        wheel = fetch_pinned_wheel(G1_WHEEL, req.cache_dir)
    else:
        src = Path(req.source)
        if not src.exists():
            raise InvalidInput(f"--source {src}: no such wheel or folder")
        if src.is_dir():
            copy_directory_source(src, staging)
            return {"kind": "directory", "spec": spec, "sha256": None, "subtree": None,
                    "license": {"expression": None, "files": []}}
        wheel = src
    digest = sha256_file(wheel)
    kind = "pinned_wheel" if digest == G1_WHEEL.sha256 else "wheel"
    extract_subtree(wheel, G1_WHEEL.subtree, staging)
    return {"kind": kind, "spec": spec, "sha256": digest, "subtree": G1_WHEEL.subtree, "license": wheel_license(wheel)}


def check_scene(model: mujoco.MjModel, scene: Path) -> dict[str, Any]:
    dims = {"nq": model.nq, "nv": model.nv, "nu": model.nu}
    if dims != EXPECTED_DIMS:
        raise InvalidInput(f"{scene}: compiled scene has {dims}, expected the G1 29-DoF {EXPECTED_DIMS}")
    return {**dims, "timestep": model.opt.timestep, "integrator": "implicitfast"}


LOCK_WAIT_S = 600.0  # a pinned-wheel download plus extraction fits well inside this


@contextmanager
def dest_lock(dest: Path) -> Iterator[None]:
    """Serialise pulls into one destination: an exclusive lock on DEST/.pull.lock, held for the
    whole pull (staging, swap, manifest). A second pull waits for the first, then finds its work
    done; one that cannot get the lock within LOCK_WAIT_S is refused."""
    dest.mkdir(parents=True, exist_ok=True)
    lock = dest / ".pull.lock"
    with exclusive(lock, LOCK_WAIT_S,
                   lambda: InvalidInput(f"--dest {dest}: another `soaklab assets pull` has held {lock} for "
                                        f"{LOCK_WAIT_S:.0f} s; wait for it or stop it"),
                   lambda: print(f"assets: waiting for another pull into {dest}", file=sys.stderr, flush=True)):
        yield


def pull_assets(req: PullRequest) -> dict[str, Any]:
    if req.robot not in ROBOTS:
        raise InvalidInput(f"--robot {req.robot}: unknown robot; valid: {', '.join(ROBOTS)}")
    if req.clip not in CLIP_CHOICES:
        raise InvalidInput(f"--clip {req.clip}: unknown clip; valid: {', '.join(CLIP_CHOICES)}")
    if req.clip_wheel is not None and not req.clip_wheel.is_file():
        raise InvalidInput(f"--clip-wheel {req.clip_wheel}: no such file")
    with dest_lock(req.dest):
        return _pull_locked(req)


def _pull_locked(req: PullRequest) -> dict[str, Any]:
    existing = read_manifest(req.manifest)
    if existing is not None and same_request(existing, req):
        problems = manifest_problems(existing)
        if not problems:
            count = len(existing["files"]) + 1 + len(existing["motions"])
            print(f"assets: {req.manifest} verified ({count} files); nothing changed")
            return existing
        if not req.repair:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise InvalidInput(f"{problems[0]}{more}; run `soaklab assets pull --repair` to restore it")
        for line in problems:
            print(f"assets: repairing {line}", file=sys.stderr)
    if offline() and req.source is None and not (req.cache_dir / G1_WHEEL.filename).is_file():
        raise InvalidInput(
            f"SOAKLAB_OFFLINE=1: G1 assets are missing under {req.robot_dir} and fetching is disabled; "
            "pass --source WHEEL_OR_DIR or unset SOAKLAB_OFFLINE"
        )

    staging = req.dest / f".staging-{req.robot}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        source = materialize_robot(req, staging)
        scene_path = scene_mod.write_scene(staging / ROBOT_XML)
        model = scene_mod.load_scene(scene_path)
        scene_info = check_scene(model, scene_path)
        default, clips = materialize_clips(req, model, staging / "motions")
        # Swap the complete tree in; the old one is removed only now.
        shutil.rmtree(req.robot_dir, ignore_errors=True)
        staging.rename(req.robot_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise

    final = req.robot_dir
    scene_final = final / scene_path.name
    clip_files = {name: final / "motions" / path.name for name, (path, _, _) in clips.items()}
    # A terrain clip's OBJ and scene, at their final paths (they moved with the staging tree).
    terrains = {name: {"obj": final / "motions" / t["obj"].name, "scene": final / t["scene"].name,
                       "member": t["member"], "pieces": t["pieces"]}
                for name, (_, _, provenance) in clips.items() if (t := provenance.get("terrain"))}
    own = {scene_final, *clip_files.values(), *(p for t in terrains.values() for p in (t["obj"], t["scene"]))}
    robot_files = sorted(p for p in final.rglob("*") if p.is_file() and p not in own)
    motions = {}
    for name, (_, clip, provenance) in clips.items():
        entry = {**file_record(clip_files[name]), "frames": clip.num_frames, "fps": clip.fps,
                 **{k: v for k, v in provenance.items() if k != "terrain"}}
        if name in terrains:
            t = terrains[name]
            entry["terrain"] = {**file_record(t["obj"]), "member": t["member"], "pieces": t["pieces"]}
            entry["scene"] = {**file_record(t["scene"]), **scene_info}
        motions[name] = entry
    manifest = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "robot": req.robot,
        "source": source,
        "root": str(final),
        "files": [file_record(p) for p in robot_files],
        "scene": {**file_record(scene_final), **scene_info},
        # The clip a run tracks unless env.motion names another of `motions`.
        "motion": {**motions[default], "clip": default, "synthetic": default == SYNTHETIC,
                   "origin": str(req.motion) if req.motion else None},
        "motions": motions,
    }
    validate_artifact("assets_manifest", manifest)
    write_json_atomic(req.manifest, manifest)
    motion = manifest["motion"]
    print(
        f"assets: {req.robot} from {source['kind']} {source['spec']} -> {final} "
        f"({len(robot_files)} files, scene nq={scene_info['nq']} nu={scene_info['nu']}, "
        f"clips {', '.join(motions)}; default {default}: {motion['frames']} frames at {motion['fps']:g} fps); "
        f"manifest {req.manifest}"
    )
    return manifest
