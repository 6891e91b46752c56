"""Motion clips: the NPZ contract, its validator and the synthetic dance clip (docs/assets-and-tasks.md).

A clip holds, per frame, the 29 joint positions/velocities and the world pose
and velocity of every robot body in model order. Real clips and the synthetic
one go through the same validator, so the task never sees an unchecked clip.
"""

from __future__ import annotations

import io
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from soaklab.assets import g1
from soaklab.errors import InvalidInput

NUM_JOINTS = 29
REQUIRED_KEYS = ("fps", "joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
SYNTHETIC_NAME = "synthetic_dance.npz"
SYNTHETIC_SEED = 20261129
SYNTHETIC_DURATION_S = 12.0
SYNTHETIC_FPS = 50.0
# Joint excursions stay inside this share of each joint's range, the same soft
# range the joint-limit penalty uses, so the reference never earns a penalty.
SOFT_RANGE = 0.9


@dataclass(frozen=True)
class MotionClip:
    fps: float
    joint_pos: np.ndarray  # [T, 29]
    joint_vel: np.ndarray  # [T, 29]
    body_pos_w: np.ndarray  # [T, B, 3]
    body_quat_w: np.ndarray  # [T, B, 4] wxyz
    body_lin_vel_w: np.ndarray  # [T, B, 3]
    body_ang_vel_w: np.ndarray  # [T, B, 3]
    body_names: tuple[str, ...] | None = None

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])


def robot_body_names(model: mujoco.MjModel) -> list[str]:
    """Every body but the world, in model order: the B axis of a clip."""
    return [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(1, model.nbody)]


MAX_CLIP_BYTES = 64 << 20  # a published clip is a few MB; refuse to inflate or allocate anything larger
NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def check_declared_sizes(path: Path) -> None:
    """Read each NPZ member's .npy header, never its array, and refuse a member that inflates or
    declares more than MAX_CLIP_BYTES, or declares more than it holds: numpy would allocate what a
    header claims (a header of 2**40 float64s died in a MemoryError traceback)."""
    total = 0
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if info.file_size > MAX_CLIP_BYTES:
                raise ValueError(f"member {info.filename} inflates to {info.file_size:,} bytes "
                                 f"(limit {MAX_CLIP_BYTES:,})")
            with zf.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version not in NPY_HEADERS:
                    raise ValueError(f"member {info.filename}: .npy format {version} is not read here")
                shape, _, dtype = NPY_HEADERS[version](member)
            declared = math.prod(shape) * dtype.itemsize
            total += declared
            if declared > info.file_size or total > MAX_CLIP_BYTES:
                raise ValueError(f"member {info.filename} declares {declared:,} bytes ({dtype} {shape}) and holds "
                                 f"{info.file_size:,} (limit {MAX_CLIP_BYTES:,} in all)")


def load_motion(path: Path, model: mujoco.MjModel) -> MotionClip:
    """Load and validate a clip against `model`; any defect fails closed naming the file and key."""
    num_bodies = model.nbody - 1

    def bad(what: str) -> InvalidInput:
        return InvalidInput(f"{path}: invalid motion clip: {what}")

    try:
        check_declared_sizes(path)
        with np.load(path, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise bad(f"cannot read NPZ ({exc})") from None
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise bad(f"missing key {missing[0]} (required: {', '.join(REQUIRED_KEYS)})")
    fps = data["fps"]
    if fps.size != 1 or not np.isfinite(fps).all() or float(fps.reshape(-1)[0]) <= 0:
        raise bad(f"fps must be one positive number, got {fps.tolist()}")
    frames = data["joint_pos"].shape[0] if data["joint_pos"].ndim else 0
    if frames < 2:
        raise bad("joint_pos needs at least 2 frames")
    expected = {
        "joint_pos": (frames, NUM_JOINTS),
        "joint_vel": (frames, NUM_JOINTS),
        "body_pos_w": (frames, num_bodies, 3),
        "body_quat_w": (frames, num_bodies, 4),
        "body_lin_vel_w": (frames, num_bodies, 3),
        "body_ang_vel_w": (frames, num_bodies, 3),
    }
    for key, shape in expected.items():
        if data[key].shape != shape:
            raise bad(f"{key} has shape {data[key].shape}, expected {shape} (frames x bodies in model order)")
        if not np.issubdtype(data[key].dtype, np.floating) or not np.isfinite(data[key]).all():
            raise bad(f"{key} must hold finite floats")
    norms = np.linalg.norm(data["body_quat_w"], axis=-1)
    if np.abs(norms - 1.0).max() > 1e-3:
        raise bad("body_quat_w must hold unit quaternions (wxyz)")
    names = None
    if "body_names" in data:
        names = tuple(str(n) for n in data["body_names"].tolist())
        if list(names) != robot_body_names(model):
            raise bad("body_names differ from the model's bodies (order matters)")
    return MotionClip(
        fps=float(fps.reshape(-1)[0]),
        joint_pos=data["joint_pos"].astype(np.float32),
        joint_vel=data["joint_vel"].astype(np.float32),
        body_pos_w=data["body_pos_w"].astype(np.float32),
        body_quat_w=data["body_quat_w"].astype(np.float32),
        body_lin_vel_w=data["body_lin_vel_w"].astype(np.float32),
        body_ang_vel_w=data["body_ang_vel_w"].astype(np.float32),
        body_names=names,
    )


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3 - 2 * x)


def _angular_velocity(quat: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity from a [T, B, 4] wxyz series: w = 2 dq/dt * conj(q)."""
    q = quat.copy()
    # Keep each series on one hemisphere so finite differences see no sign flips.
    for t in range(1, q.shape[0]):
        flip = (q[t] * q[t - 1]).sum(-1) < 0
        q[t, flip] *= -1
    dq = np.gradient(q, dt, axis=0)
    w0, v0 = dq[..., :1], dq[..., 1:]
    w1, v1 = q[..., :1], -q[..., 1:]  # conjugate
    vec = w0 * v1 + w1 * v0 + np.cross(v0, v1)
    return 2.0 * vec


def _lowest_foot_point(model: mujoco.MjModel, data: mujoco.MjData, foot_geoms: list[int]) -> float:
    """Lowest z over the foot capsules (endpoints minus radius)."""
    lowest = np.inf
    for gid in foot_geoms:
        radius, half = model.geom_size[gid, 0], model.geom_size[gid, 1]
        axis = data.geom_xmat[gid].reshape(3, 3)[:, 2]
        centre = data.geom_xpos[gid]
        lowest = min(lowest, centre[2] - abs(axis[2]) * half - radius)
    return float(lowest)


def generate_synthetic_clip(
    model: mujoco.MjModel, seed: int = SYNTHETIC_SEED, duration_s: float = SYNTHETIC_DURATION_S,
    fps: float = SYNTHETIC_FPS,
) -> MotionClip:
    """A deterministic dance: smooth joint sway inside the soft joint range, feet on the floor.

    Forward kinematics on the scene model gives every body's pose; the root
    height is set per frame so the lowest foot point touches the floor.
    The clip starts at the default pose and eases into the motion over 1 s.
    """
    rng = np.random.default_rng(seed)
    frames = int(round(duration_s * fps)) + 1
    t = np.arange(frames) / fps
    data = mujoco.MjData(model)
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, "home")
    home = model.key_qpos[key].copy()
    default = home[7:]
    lo, hi = model.jnt_range[1:, 0], model.jnt_range[1:, 1]
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    soft_lo, soft_hi = mid - SOFT_RANGE * half, mid + SOFT_RANGE * half
    room = np.maximum(np.minimum(default - soft_lo, soft_hi - default), 0.0)

    envelope = _smoothstep(t / 1.0)[:, None]
    joint_pos = np.repeat(default[None], frames, axis=0)
    for _ in range(2):  # two sinusoids per joint, each within half the room
        freq = rng.uniform(0.2, 0.8, size=NUM_JOINTS)
        phase = rng.uniform(0, 2 * np.pi, size=NUM_JOINTS)
        amp = 0.5 * room * rng.uniform(0.3, 0.9, size=NUM_JOINTS)
        joint_pos += envelope * amp * np.sin(2 * np.pi * freq * t[:, None] + phase)

    yaw = 0.3 * envelope[:, 0] * np.sin(2 * np.pi * 0.1 * t)
    root_xy = 0.05 * envelope * np.stack([np.sin(2 * np.pi * 0.15 * t), np.sin(2 * np.pi * 0.2 * t)], axis=1)

    foot_geoms = [
        g for g in range(model.ngeom)
        if g1.FOOT_GEOM_PATTERN.match(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "")
    ]
    num_bodies = model.nbody - 1
    qpos_all = np.zeros((frames, model.nq))
    body_pos = np.zeros((frames, num_bodies, 3))
    body_quat = np.zeros((frames, num_bodies, 4))
    for i in range(frames):
        qpos = np.concatenate([[root_xy[i, 0], root_xy[i, 1], 0.0, np.cos(yaw[i] / 2), 0, 0, np.sin(yaw[i] / 2)],
                               joint_pos[i]])
        data.qpos[:] = qpos
        mujoco.mj_kinematics(model, data)
        qpos[2] = -_lowest_foot_point(model, data, foot_geoms)
        data.qpos[:] = qpos
        mujoco.mj_kinematics(model, data)
        qpos_all[i] = qpos
        body_pos[i] = data.xpos[1:]
        body_quat[i] = data.xquat[1:]

    dt = 1.0 / fps
    return MotionClip(
        fps=fps,
        joint_pos=joint_pos.astype(np.float32),
        joint_vel=np.gradient(joint_pos, dt, axis=0).astype(np.float32),
        body_pos_w=body_pos.astype(np.float32),
        body_quat_w=body_quat.astype(np.float32),
        body_lin_vel_w=np.gradient(body_pos, dt, axis=0).astype(np.float32),
        body_ang_vel_w=_angular_velocity(body_quat, dt).astype(np.float32),
        body_names=tuple(robot_body_names(model)),
    )


def save_motion(clip: MotionClip, path: Path) -> None:
    """Write an NPZ byte-for-byte reproducibly (fixed zip timestamps, fixed key order)."""
    arrays = {
        "fps": np.asarray(clip.fps, dtype=np.float64),
        "joint_pos": clip.joint_pos,
        "joint_vel": clip.joint_vel,
        "body_pos_w": clip.body_pos_w,
        "body_quat_w": clip.body_quat_w,
        "body_lin_vel_w": clip.body_lin_vel_w,
        "body_ang_vel_w": clip.body_ang_vel_w,
    }
    if clip.body_names is not None:
        arrays["body_names"] = np.asarray(clip.body_names)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".npz.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, array in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())
    tmp.replace(path)
