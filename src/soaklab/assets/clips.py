"""The reference clips a pull can materialize, and the conversion of published clips by name.

`largebox` (the default) is a person bending down and carrying a box, retargeted to
the G1 29-DoF by holosoma and shipped in its pinned wheel (Apache-2.0). Its NPZ has
the task's layout except that the root sits in the first 7 columns of `joint_pos`
(6 of `joint_vel`) and the body axis covers holosoma's own body set (a superset
with ankle spheres, thumbs, pinkies): joints and bodies are taken by name, in the
model's order, so a clip for another robot fails here, naming what it lacks.
`crawl_slope` (same wheel) crawls up a ramp onto a platform: its terrain OBJ comes with it and
becomes the scene of the runs that track it (soaklab.assets.terrain).
`synthetic` is generated locally (no download), for fast offline tests.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from soaklab.assets.motion import MAX_CLIP_BYTES, NUM_JOINTS, MotionClip, robot_body_names
from soaklab.assets.source import PinnedWheel, safe_member_path
from soaklab.errors import InvalidInput

HOLOSOMA_WHEEL = PinnedWheel(
    package="holosoma",
    version="0.0.3",
    sha256="1c007c27dbf130c04533af6052649d88da32eaa9b54e69c6d39009e979a2312f",
    subtree="holosoma/data/motions/g1_29dof/whole_body_tracking/",
)
# Bodies of a converted clip must sit where the model's forward kinematics puts them for the
# clip's own joint angles, within this much: the clip is for this robot, not a look-alike.
# (holosoma's G1 differs from mjlab's by ~1 cm at the hands.)
FK_TOLERANCE_M = 0.05


@dataclass(frozen=True)
class PublishedClip:
    name: str
    wheel: PinnedWheel
    member: str  # file name inside the wheel's subtree
    terrain: str | None = None  # the clip's terrain OBJ beside it in the subtree (soaklab.assets.terrain)

    @property
    def archive_name(self) -> str:
        return self.wheel.subtree + self.member

    @property
    def terrain_archive_name(self) -> str | None:
        return None if self.terrain is None else self.wheel.subtree + self.terrain

    @property
    def file_name(self) -> str:
        return f"{self.name}.npz"


SYNTHETIC = "synthetic"
PUBLISHED_CLIPS = {
    "largebox": PublishedClip("largebox", HOLOSOMA_WHEEL, "sub3_largebox_003_mj.npz"),
    # Crawling up a ramp onto a platform (959 frames at 50 fps), on the terrain it was captured on.
    "crawl_slope": PublishedClip("crawl_slope", HOLOSOMA_WHEEL, "motion_crawl_slope.npz", terrain="terrain_slope.obj"),
}
CLIP_CHOICES = (*PUBLISHED_CLIPS, SYNTHETIC)
DEFAULT_CLIP = "largebox"


def read_member(wheel_path: Path, clip: PublishedClip, member: str | None = None) -> bytes:
    """The bytes of `member` (default: the clip's NPZ) from the wheel; only that member is read,
    after the name checks every archive member from outside gets."""
    member = member or clip.archive_name
    try:
        with zipfile.ZipFile(wheel_path) as zf:
            for info in zf.infolist():
                safe_member_path(info.filename, clip.wheel.subtree)  # refuses hostile names anywhere
            try:
                info = zf.getinfo(member)
            except KeyError:
                raise InvalidInput(f"{wheel_path}: no {member} in this wheel") from None
            if info.file_size > MAX_CLIP_BYTES:
                raise InvalidInput(f"{wheel_path}: {member} inflates to {info.file_size} bytes "
                                   f"(limit {MAX_CLIP_BYTES})")
            return zf.read(info)
    except zipfile.BadZipFile as exc:
        raise InvalidInput(f"{wheel_path}: not a wheel ({exc})") from None


def _names(data: dict[str, np.ndarray], key: str, where: str) -> list[str]:
    if key not in data or data[key].ndim != 1 or data[key].dtype.kind not in "US":
        raise InvalidInput(f"{where}: no {key} (a 1-D string array) to map by name")
    return [str(n) for n in data[key].tolist()]


def _pick(names: list[str], wanted: list[str], what: str, where: str) -> list[int]:
    missing = [n for n in wanted if n not in names]
    if missing:
        raise InvalidInput(f"{where}: the clip's {what} do not cover the model: missing {', '.join(missing[:3])}"
                           f"{' ...' if len(missing) > 3 else ''} ({len(missing)} of {len(wanted)})")
    return [names.index(n) for n in wanted]


def convert_by_name(raw: bytes, where: str, model: mujoco.MjModel) -> MotionClip:
    """A published clip (root in joint_pos[:, :7], named joints and bodies) in the task's format:
    29 joints and every model body, in model order."""
    import io

    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise InvalidInput(f"{where}: cannot read NPZ ({exc})") from None
    for key in ("fps", "joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        if key not in data:
            raise InvalidInput(f"{where}: missing key {key}")
    joint_names = [model.joint(j).name for j in range(1, model.njnt)]
    joints = _pick(_names(data, "joint_names", where), joint_names, "joint_names", where)
    bodies = _pick(_names(data, "body_names", where), robot_body_names(model), "body_names", where)
    frames = data["joint_pos"].shape[0] if data["joint_pos"].ndim == 2 else 0
    expected_cols = {"joint_pos": 7 + len(data["joint_names"]), "joint_vel": 6 + len(data["joint_names"])}
    for key, cols in expected_cols.items():
        if data[key].ndim != 2 or data[key].shape != (frames, cols):
            raise InvalidInput(f"{where}: {key} has shape {data[key].shape}, expected ({frames}, {cols}): "
                               "root then the named joints")
    body_axis = len(data["body_names"])
    for key, width in (("body_pos_w", 3), ("body_quat_w", 4), ("body_lin_vel_w", 3), ("body_ang_vel_w", 3)):
        if data[key].shape != (frames, body_axis, width):
            raise InvalidInput(f"{where}: {key} has shape {data[key].shape}, expected ({frames}, {body_axis}, {width})")
    joint_cols = [7 + j for j in joints]
    clip = MotionClip(
        fps=float(np.asarray(data["fps"]).reshape(-1)[0]),
        joint_pos=data["joint_pos"][:, joint_cols].astype(np.float32),
        joint_vel=data["joint_vel"][:, [6 + j for j in joints]].astype(np.float32),
        body_pos_w=data["body_pos_w"][:, bodies].astype(np.float32),
        body_quat_w=data["body_quat_w"][:, bodies].astype(np.float32),
        body_lin_vel_w=data["body_lin_vel_w"][:, bodies].astype(np.float32),
        body_ang_vel_w=data["body_ang_vel_w"][:, bodies].astype(np.float32),
        body_names=tuple(robot_body_names(model)),
    )
    arrays = (clip.joint_pos, clip.joint_vel, clip.body_pos_w, clip.body_quat_w, clip.body_lin_vel_w,
              clip.body_ang_vel_w, data["joint_pos"][:, :7])
    if not all(np.isfinite(a).all() for a in arrays) or not np.isfinite(clip.fps) or clip.fps <= 0:
        raise InvalidInput(f"{where}: the clip holds non-finite values or a non-positive fps")
    if clip.joint_pos.shape[1] != NUM_JOINTS:
        raise InvalidInput(f"{where}: {clip.joint_pos.shape[1]} joints mapped, the model has {NUM_JOINTS}")
    deviation = fk_deviation(model, data["joint_pos"][:, :7], clip)
    if not np.isfinite(deviation) or deviation > FK_TOLERANCE_M:
        raise InvalidInput(f"{where}: bodies lie up to {deviation:.3f} m from where this model puts them for the "
                           f"clip's joint angles (limit {FK_TOLERANCE_M} m): a clip for another robot")
    return clip


def fk_deviation(model: mujoco.MjModel, root: np.ndarray, clip: MotionClip, stride: int = 5) -> float:
    """Largest distance between a clip's body positions and the model's forward kinematics."""
    data = mujoco.MjData(model)
    worst = 0.0
    for t in range(0, clip.num_frames, stride):
        data.qpos[:7], data.qpos[7:] = root[t], clip.joint_pos[t]
        mujoco.mj_kinematics(model, data)
        worst = max(worst, float(np.linalg.norm(data.xpos[1:] - clip.body_pos_w[t], axis=-1).max()))
    return worst
