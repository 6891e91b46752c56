"""The robot and its clip on plain MuJoCo, as the contract names them: the model loaded by path (its
SHA-256 checked) or from the XML the contract carries, the clip's arrays, N episodes of MjData, the
actions applied to the named actuators, and the state read back as the policy's observations see it.

The readings follow soaklab's CPU backend exactly, so the figures can match `soaklab evaluate`'s: a
control step sets ctrl and advances `decimation` physics steps, ending with MuJoCo's position and
velocity stages computed for the state just integrated (mj_step2, then decimation - 1 mj_steps, then
mj_step1; a reset runs mj_forward), and every reading is rounded to float32, the observation's dtype.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from soaklab.errors import InvalidInput

F32 = np.float32
CLIP_FIELDS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")


PULL = "give --assets DIR (the tree `soaklab assets pull --dest DIR` wrote) or run `soaklab assets pull` here"


def asset_path(entry: dict[str, Any], what: str, assets: Path) -> Path:
    """Where the file a contract names lies: its path is relative to the asset tree (`--assets`), and
    must stay inside it (no absolute path, no `..`, no symlink out of it)."""
    named = Path(entry["path"])
    if named.is_absolute():
        raise InvalidInput(f"contract: the {what} is named by the absolute path {str(named)[:120]} (a contract "
                           "exported before paths relative to the asset tree); export the policy again")
    if not assets.is_dir():
        raise InvalidInput(f"--assets {assets}: no such folder, and the contract names its {what} in the asset "
                           f"tree; {PULL}")
    root = Path(os.path.realpath(assets))
    real = Path(os.path.realpath(root / named))
    if ".." in named.parts or root not in real.parents:
        raise InvalidInput(f"contract: the {what} {str(named)[:120]} lies outside the asset tree --assets {assets}; "
                           "a contract names files inside it")
    return real


def checked_file(entry: dict[str, Any], what: str, assets: Path) -> Path:
    """The file a contract names, under `assets`, present and with the contract's SHA-256 (of that
    file alone: a scene's meshes are checked by `soaklab assets pull`, docs/export.md)."""
    path = asset_path(entry, what, assets)
    if not path.is_file():
        raise InvalidInput(f"{path}: the {what} the contract names is absent under --assets {assets}; {PULL}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != entry["sha256"]:
        raise InvalidInput(f"{path}: the {what} differs from the one the policy was trained with (sha256 "
                           f"{digest[:12]}, the contract says {entry['sha256'][:12]}); pull the same assets")
    return path


# An inline model is self-contained: a file attribute (include, mesh, texture, height field) would
# read a file the contract's hash does not cover.
FILE_ATTRIBUTE = re.compile(r"\bfile\s*=")


def first_line(exc: Exception) -> str:
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return text[:120]


def load_model(entry: dict[str, Any], assets: Path) -> mujoco.MjModel:
    """The robot model: the contract's XML (checked against its hash), or the file it names under
    `assets`; one that MuJoCo does not load is refused in one line."""
    if "xml" in entry:
        if hashlib.sha256(entry["xml"].encode()).hexdigest() != entry["sha256"]:
            raise InvalidInput("contract robot_model: its xml does not match its sha256; export the policy again")
        if FILE_ATTRIBUTE.search(entry["xml"]):
            raise InvalidInput("contract robot_model: its xml reads a file (a file= attribute: include, mesh, "
                               "texture); an inline model is self-contained; export the policy again")
        where, load = "contract robot_model (its xml)", lambda: mujoco.MjModel.from_xml_string(entry["xml"])
    else:
        path = checked_file(entry, "robot model", assets)
        where, load = str(path), lambda: mujoco.MjModel.from_xml_path(str(path))
    try:
        return load()
    except ValueError as exc:  # MuJoCo's XML, include and mesh errors
        raise InvalidInput(f"{where}: the robot model the contract names does not load in MuJoCo "
                           f"({first_line(exc)}); pull the same assets or export the policy again") from None


def load_clip(entry: dict[str, Any], model: mujoco.MjModel, assets: Path) -> dict[str, Any]:
    """The clip's arrays as float32 (the table the task reads), with its rate and length."""
    path = checked_file(entry, f"clip {entry['label']}", assets)
    try:
        with np.load(path, allow_pickle=False) as npz:
            clip: dict[str, Any] = {k: np.asarray(npz[k], dtype=F32) for k in CLIP_FIELDS}
            clip["fps"] = float(np.asarray(npz["fps"]).reshape(-1)[0])
    except (OSError, ValueError, KeyError) as exc:  # a hash-checked file: only a clip soaklab never wrote
        raise InvalidInput(f"{path}: not a motion clip ({type(exc).__name__}: {exc})") from None
    joints = sum(1 for j in range(model.njnt) if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE)
    if clip["body_pos_w"].shape[1:2] != (model.nbody - 1,) or clip["joint_pos"].shape[1:] != (joints,):
        raise InvalidInput(f"{path}: clip has {clip['body_pos_w'].shape[1:2]} bodies and {clip['joint_pos'].shape[1:]} "
                           f"joints, the robot model {model.nbody - 1} and {joints}; the clip is of another robot")
    clip["frames"] = int(clip["joint_pos"].shape[0])
    return clip


def body_id(model: mujoco.MjModel, name: str) -> int:
    found = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    if found < 0:
        raise InvalidInput(f"contract names body {name!r}: the robot model has none")
    return int(found)


@dataclass(frozen=True)
class Joints:
    """Where each named joint lives: qpos and qvel addresses, and its column in a clip (clips hold
    the model's non-free joints in model order)."""

    qpos: np.ndarray
    qvel: np.ndarray
    column: np.ndarray

    @classmethod
    def of(cls, model: mujoco.MjModel, names: list[str]) -> Joints:
        free = mujoco.mjtJoint.mjJNT_FREE
        hinges = [j for j in range(model.njnt) if model.jnt_type[j] != free]
        ids = []
        for name in names:
            j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if j < 0:
                raise InvalidInput(f"contract names joint {name!r}: the robot model has none")
            ids.append(j)
        return cls(np.array([model.jnt_qposadr[j] for j in ids]), np.array([model.jnt_dofadr[j] for j in ids]),
                   np.array([hinges.index(j) if j in hinges else -1 for j in ids]))


class Episodes:
    """N episodes stepped together, one MjData each."""

    def __init__(self, model: mujoco.MjModel, n: int, decimation: int, actuators: np.ndarray) -> None:
        self.model, self.decimation, self.actuators = model, decimation, actuators
        self.datas = [mujoco.MjData(model) for _ in range(n)]

    def reset(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        for d, p, v in zip(self.datas, qpos, qvel, strict=True):
            mujoco.mj_resetData(self.model, d)
            d.qpos[:], d.qvel[:] = p, v
            mujoco.mj_forward(self.model, d)

    def step(self, targets: np.ndarray) -> None:
        """Each episode's controls (action order) onto the contract's actuators, one control step."""
        m = self.model
        for d, row in zip(self.datas, targets, strict=True):
            d.ctrl[self.actuators] = row
            mujoco.mj_step2(m, d)
            for _ in range(self.decimation - 1):
                mujoco.mj_step(m, d)
            mujoco.mj_step1(m, d)

    def qpos(self) -> np.ndarray:
        return np.stack([d.qpos for d in self.datas]).astype(F32)

    def qvel(self) -> np.ndarray:
        return np.stack([d.qvel for d in self.datas]).astype(F32)

    def bodies(self, ids: list[int]) -> dict[str, np.ndarray]:
        """World-frame position, orientation (wxyz) and velocity of each body's frame, [N, K, *]."""
        vel = np.zeros(6)
        out = {k: np.zeros((len(self.datas), len(ids), w), dtype=F32)
               for k, w in (("pos", 3), ("quat", 4), ("lin_vel", 3), ("ang_vel", 3))}
        for i, d in enumerate(self.datas):
            out["pos"][i] = d.xpos[ids]
            out["quat"][i] = d.xquat[ids]
            for k, b in enumerate(ids):
                mujoco.mj_objectVelocity(self.model, d, mujoco.mjtObj.mjOBJ_XBODY, b, vel, 0)
                out["ang_vel"][i, k], out["lin_vel"][i, k] = vel[:3], vel[3:]
        return out


def actuator_ids(model: mujoco.MjModel, channels: list[dict[str, Any]]) -> np.ndarray:
    """The model's actuator of each channel, checked: it exists and drives the joint the contract
    pairs it with, with the contract's gains where the actuation is position PD."""
    ids = []
    for i, c in enumerate(channels):
        a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, c["actuator"])
        if a < 0:
            raise InvalidInput(f"contract action {i}: actuator {c['actuator']!r} is not in the robot model")
        joint = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(model.actuator_trnid[a, 0]))
        if joint != c["joint"]:
            raise InvalidInput(f"contract action {i}: actuator {c['actuator']} drives {joint} in the robot model, "
                               f"not {c['joint']}")
        model_gains = (model.actuator_gainprm[a, 0], -model.actuator_biasprm[a, 2], model.actuator_forcerange[a, 1])
        if c["kp"] is not None and not np.allclose(model_gains, (c["kp"], c["kd"], c["effort_limit"])):
            raise InvalidInput(f"contract action {i} ({c['joint']}): kp, kd, effort limit {c['kp']:.4g}, "
                               f"{c['kd']:.4g}, {c['effort_limit']:.4g}; the robot model's actuator "
                               f"{', '.join(f'{g:.4g}' for g in model_gains)}")
        ids.append(a)
    return np.array(ids)
