"""What G1 motion tracking's policy needs from a deployment, as plain data: the task's half of the
policy contract `soaklab export` writes into the ONNX file (docs/export.md, "The contract").

Every value is read from the env the policy was trained in (its model, default pose, action scale,
clip layout and settings), so the contract and the task cannot drift apart; the vocabulary of
observation sources, resets, terminations and metrics is what `soaklab.deploy` implements.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mujoco

from soaklab.assets import g1
from soaklab.assets.record import scene_of
from soaklab.contract.sections import RunConfig
from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import sha256_file
from soaklab.tasks.metrics import clip_labels


def asset_root(assets: dict[str, Any]) -> Path:
    """The asset tree (`soaklab assets pull --dest`): the folder of the robot's tree, which holds the
    manifest's scene (DEST/<robot>/scene.xml). A contract names its files relative to it."""
    return Path(assets["scene"]).resolve().parent.parent


def file_entry(path: str, root: Path) -> dict[str, Any]:
    """A file as the contract names it: its path under the asset tree, and its SHA-256."""
    real = Path(path).resolve()
    if root not in real.parents:
        raise InvalidInput(f"{path}: lies outside the asset tree {root}; a policy contract names its files "
                           "relative to it (docs/export.md): train on a clip inside it (`soaklab assets pull --clip`)")
    return {"path": real.relative_to(root).as_posix(), "sha256": sha256_file(real)}


def clips(run: RunConfig, assets: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's clips, in env.motion's order, each with its scene (a terrain clip brings its own)."""
    motion = run.env.motion
    items = list(motion) if isinstance(motion, tuple) else [motion]
    labels = clip_labels(tuple(items))  # evaluate's labels: each clip file's stem
    root = asset_root(assets)
    return [{"label": label, **file_entry(str(path), root),
             "scene": file_entry(str(scene_of(assets, str(path))), root)}
            for label, path in zip(labels, items, strict=True)]


def policy_contract(run: RunConfig, assets: dict[str, Any], env: Any) -> dict[str, Any]:
    """The task's half of the contract, from `env` (a G1MotionTrackingEnv tracking the run's
    playback clip on its scene). The robot model is the manifest's scene (a terrain clip's own scene
    is named by its clip)."""
    cfg, model = env.cfg, env.backend.model
    joints = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(1, model.njnt)]
    actuators = {int(model.actuator_trnid[a, 0]): mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a)
                 for a in range(model.nu)}
    root = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, 1)
    channels = []
    for j, name in enumerate(joints):
        motor = g1.motor_class(name)
        channels.append({"joint": name, "actuator": actuators[j + 1],
                         "default_pos": float(env.default_joint_pos[j]), "offset": float(env.default_joint_pos[j]),
                         "scale": float(env.action_scale[j]), "kp": motor.kp, "kd": motor.kd,
                         "effort_limit": motor.effort_limit})
    anchor = cfg.anchor_body
    blocks = [
        ("ref_joint_pos", 29, "rad", "joint space, action order",
         {"kind": "clip", "field": "joint_pos", "frame_offset": 0}),
        ("ref_joint_vel", 29, "rad/s", "joint space, action order",
         {"kind": "clip", "field": "joint_vel", "frame_offset": 0}),
        ("ref_anchor_pos_b", 3, "m", f"robot {anchor} frame",
         {"kind": "clip_body_in_robot_body_frame", "body": anchor, "quantity": "pos", "frame_offset": 0}),
        ("ref_anchor_ori_b", 6, "1", f"robot {anchor} frame",
         {"kind": "clip_body_in_robot_body_frame", "body": anchor, "quantity": "ori_6d", "frame_offset": 0}),
        ("base_lin_vel", 3, "m/s", f"robot {root} frame", {"kind": "body_velocity", "body": root, "quantity": "lin"}),
        ("base_ang_vel", 3, "rad/s", f"robot {root} frame", {"kind": "body_velocity", "body": root, "quantity": "ang"}),
        ("joint_pos_rel", 29, "rad", "joint space, action order",
         {"kind": "joint", "quantity": "pos", "joints": "action", "map": "minus_default"}),
        ("joint_vel", 29, "rad/s", "joint space, action order",
         {"kind": "joint", "quantity": "vel", "joints": "action", "map": "identity"}),
        ("last_action", 29, "1", "action space", {"kind": "last_action"}),
    ]
    return {
        "robot_model": file_entry(str(assets["scene"]), asset_root(assets)),
        "clips": clips(run, assets),
        "timing": {"control_dt": cfg.ctrl_dt, "decimation": cfg.decimation, "sim_timestep": float(model.opt.timestep)},
        "observation": layout(blocks),
        "action": {"dim": len(channels), "clamp": None, "actuation": "position_pd", "channels": channels},
        "reset": {"kind": "clip_first_frame", "root_body": root,
                  "noise": {"joint_pos": cfg.noise_joint_pos, "root_pos_xy": cfg.noise_root_pos,
                            "root_yaw": cfg.noise_root_yaw}},
        "episode": {"end": "clip_last_frame", "max_steps": None},
        "terminations": [
            {"kind": "body_height_error", "body": anchor, "threshold": cfg.anchor_height},
            {"kind": "body_tilt_error", "body": anchor, "threshold": cfg.anchor_ori},
            {"kind": "reanchored_height_error", "anchor": anchor, "bodies": list(cfg.end_effector_bodies),
             "threshold": cfg.end_effector_height},
        ],
        "metrics": {"kind": "tracking", "tracked_bodies": list(cfg.tracked_bodies), "root_body": root},
    }


def layout(blocks: list[tuple[str, int, str, str, dict[str, Any]]]) -> dict[str, Any]:
    """Blocks of (name, width, units, frame, source) laid end to end from 0."""
    out, start = [], 0
    for name, width, units, frame, source in blocks:
        out.append({"name": name, "start": start, "stop": start + width, "units": units, "frame": frame,
                    "source": source})
        start += width
    return {"dim": start, "dtype": "float32", "blocks": out}
