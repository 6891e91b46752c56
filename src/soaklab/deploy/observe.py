"""The observation built from the contract's block descriptions, the terminations and the tracking
errors, in numpy float32 with the operations in the order soaklab's task computes them (quaternions
wxyz, as MuJoCo stores them), so the same state gives the same numbers.

Each source kind (docs/export.md, "Observation sources"):
- `clip`: the clip's `field` (joint_pos or joint_vel) at the current reference frame, in action order;
- `clip_body_in_robot_body_frame`: the clip's `body` relative to the robot's same body, in the robot
  body's frame: position (`pos`, m) or the first two columns of the relative rotation matrix,
  row-major (`ori_6d`);
- `body_velocity`: the robot `body`'s linear (`lin`) or angular (`ang`) velocity in its own frame;
- `joint`: joint `quantity` (pos or vel) of `joints` ("action": the action order), mapped by
  `identity`, `minus_default` (the channel's default_pos subtracted), `cos` or `sin`;
- `last_action`: the previous control step's action (zeros after a reset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

F32 = np.float32
ONE, TWO = F32(1.0), F32(2.0)


def conj(q: np.ndarray) -> np.ndarray:
    return np.concatenate([q[..., :1], -q[..., 1:]], axis=-1)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a x b in float32 as torch's CPU kernel computes it, each component one fused multiply-add,
    a_i b_j - round(a_j b_i) rounded once (the float32 products are exact in float64)."""
    first = a[..., [1, 2, 0]].astype(np.float64) * b[..., [2, 0, 1]]
    second = (a[..., [2, 0, 1]] * b[..., [1, 2, 0]]).astype(np.float64)
    return (first - second).astype(F32)


def quat_apply(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """v rotated by unit quaternion q: v + 2w(u x v) + 2 u x (u x v)."""
    w, u = q[..., :1], q[..., 1:]
    t = TWO * cross(u, v)
    return v + w * t + cross(u, t)


def quat_apply_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    return quat_apply(conj(q), v)


def matrix_6d(q: np.ndarray) -> np.ndarray:
    w, x, y, z = np.moveaxis(q, -1, 0)
    col0 = np.stack([ONE - TWO * (y * y + z * z), TWO * (x * y + w * z), TWO * (x * z - w * y)], axis=-1)
    col1 = np.stack([TWO * (x * y - w * z), ONE - TWO * (x * x + z * z), TWO * (y * z + w * x)], axis=-1)
    return np.stack([col0, col1], axis=-1).reshape(*q.shape[:-1], 6)


def gravity_z(q: np.ndarray) -> np.ndarray:
    """z of world gravity (0, 0, -1) in the frame of q."""
    _, x, y, _ = np.moveaxis(q, -1, 0)
    return -(ONE - TWO * (x * x + y * y))


def quat_from_yaw(yaw: np.ndarray) -> np.ndarray:
    """The rotation about world z by `yaw`, its cosine and sine correctly rounded to float32 (as the
    task's tensor library computes them for fewer than 8 values; for more, its vectorised cosine
    differs in the last bit for about one value in twenty, so a start may differ by 1e-7 there)."""
    half = (yaw / TWO).astype(np.float64)
    zeros = np.zeros_like(yaw)
    return np.stack([np.cos(half).astype(F32), zeros, zeros, np.sin(half).astype(F32)], axis=-1)


@dataclass(frozen=True)
class State:
    """What one control step leaves for the policy to see, float32, [N, ...]."""

    qpos: np.ndarray
    qvel: np.ndarray
    bodies: dict[str, np.ndarray]  # pos, quat, lin_vel, ang_vel of the bodies named, [N, K, *]
    body_index: dict[str, int]  # body name -> its K index
    ref: dict[str, np.ndarray] | None  # the clip at the current frame: joint_pos, joint_vel [N, J] (clip
    # columns), body_pos_w, body_quat_w [N, B, *] (model body id - 1)
    last_action: np.ndarray


def block(source: dict[str, Any], state: State, joints: Any, action_joints: Any, default: np.ndarray) -> np.ndarray:
    kind = source["kind"]
    if kind == "clip":
        return state.ref[source["field"]][:, action_joints.column]  # type: ignore[index]
    if kind == "clip_body_in_robot_body_frame":
        k, b = state.body_index[source["body"]], source["_clip_body"]
        robot_pos, robot_quat = state.bodies["pos"][:, k], state.bodies["quat"][:, k]
        ref = state.ref  # type: ignore[assignment]
        if source["quantity"] == "pos":
            return quat_apply_inverse(robot_quat, ref["body_pos_w"][:, b] - robot_pos)
        return matrix_6d(quat_mul(conj(robot_quat), ref["body_quat_w"][:, b]))
    if kind == "body_velocity":
        k = state.body_index[source["body"]]
        field = "lin_vel" if source["quantity"] == "lin" else "ang_vel"
        return quat_apply_inverse(state.bodies["quat"][:, k], state.bodies[field][:, k])
    if kind == "joint":
        where = action_joints if source["joints"] == "action" else joints[tuple(source["joints"])]
        values = state.qpos[:, where.qpos] if source["quantity"] == "pos" else state.qvel[:, where.qvel]
        mapped = {"identity": lambda v: v, "minus_default": lambda v: v - default,
                  "cos": np.cos, "sin": np.sin}[source["map"]]
        return mapped(values)
    if kind == "last_action":
        return state.last_action
    raise ValueError(f"unknown observation source {kind!r}")  # the schema admits none other


def observation(blocks: list[dict[str, Any]], state: State, joints: Any, action_joints: Any,
                default: np.ndarray) -> np.ndarray:
    """[N, dim] float32: each block's values at its slice (the slices tile the observation)."""
    n = state.qpos.shape[0]
    out = np.zeros((n, blocks[-1]["stop"]), dtype=F32)
    for b in blocks:
        values = np.asarray(block(b["source"], state, joints, action_joints, default), dtype=F32)
        out[:, b["start"]:b["stop"]] = values.reshape(n, -1)
    return out


def terminated(terminations: list[dict[str, Any]], state: State, clip_body: dict[str, int]) -> np.ndarray:
    """[N] bool: any of the contract's terminations."""
    n = state.qpos.shape[0]
    out = np.zeros(n, dtype=bool)
    for t in terminations:
        kind, limit = t["kind"], F32(t["threshold"])
        if kind == "joint_pos_beyond":
            out |= np.abs(state.qpos[:, t["_qpos"]]) > limit
            continue
        ref = state.ref  # type: ignore[assignment]
        if kind == "body_height_error":
            k, b = state.body_index[t["body"]], clip_body[t["body"]]
            out |= np.abs(ref["body_pos_w"][:, b, 2] - state.bodies["pos"][:, k, 2]) > limit
        elif kind == "body_tilt_error":
            k, b = state.body_index[t["body"]], clip_body[t["body"]]
            out |= np.abs(gravity_z(ref["body_quat_w"][:, b]) - gravity_z(state.bodies["quat"][:, k])) > limit
        elif kind == "reanchored_height_error":
            # The clip's bodies moved so its anchor sits on the robot's in x/y and yaw: heights keep the
            # clip's, as the anchor's height plus the body's height above it.
            a = clip_body[t["anchor"]]
            ref_z = ref["body_pos_w"][:, [clip_body[x] for x in t["bodies"]], 2]
            anchor_z = ref["body_pos_w"][:, a, 2][:, None]
            robot_z = state.bodies["pos"][:, [state.body_index[x] for x in t["bodies"]], 2]
            out |= (np.abs((anchor_z + (ref_z - anchor_z)) - robot_z) > limit).any(-1)
    return out


def tracking_errors(state: State, tracked: list[int], tracked_clip: list[int], root: int, root_clip: int,
                    action_joints: Any) -> np.ndarray:
    """[3, N] float64: MPKPE of the tracked bodies (world frame, the mean over bodies of each one's
    distance from the clip's), the same with each body taken relative to the root body, and the mean
    |joint error| over the action's joints, per episode. Computed in float64 from the float32 readings:
    soaklab's task sums them in float32 in its tensor library's order, so its figures agree with these
    to about 1e-7, relative (docs/export.md)."""
    ref = {k: v.astype(np.float64) for k, v in state.ref.items()}  # type: ignore[union-attr]
    robot = state.bodies["pos"].astype(np.float64)
    ref_pos, robot_pos = ref["body_pos_w"][:, tracked_clip], robot[:, tracked]
    mpkpe = np.sqrt(((ref_pos - robot_pos) ** 2).sum(-1)).mean(-1)
    relative = (ref_pos - ref["body_pos_w"][:, root_clip:root_clip + 1]) - (robot_pos - robot[:, root:root + 1])
    joint = np.abs(ref["joint_pos"][:, action_joints.column] - state.qpos[:, action_joints.qpos]).mean(-1)
    return np.stack([mpkpe, np.sqrt((relative ** 2).sum(-1)).mean(-1), joint])
