"""What cart-pole's policy needs from a deployment, as plain data: the task's half of the policy
contract `soaklab export` writes into the ONNX file (docs/export.md, "The contract").

The model is built in code, not pulled as an asset, so the contract carries its MuJoCo XML itself.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from soaklab.contract.sections import RunConfig
from soaklab.tasks.cartpole.env import build_spec

SLIDER, HINGE = "slider", "hinge"


def policy_contract(run: RunConfig, assets: dict[str, Any] | None, env: Any) -> dict[str, Any]:
    """The task's half of the contract, from `env` (a CartpoleSwingupEnv)."""
    cfg = env.cfg
    spec = build_spec()
    spec.compile()
    xml = spec.to_xml()
    one = [("pole_cos", "1", {"kind": "joint", "quantity": "pos", "joints": [HINGE], "map": "cos"}),
           ("pole_sin", "1", {"kind": "joint", "quantity": "pos", "joints": [HINGE], "map": "sin"}),
           ("cart_pos", "m", {"kind": "joint", "quantity": "pos", "joints": [SLIDER], "map": "identity"}),
           ("cart_vel", "m/s", {"kind": "joint", "quantity": "vel", "joints": [SLIDER], "map": "identity"}),
           ("pole_vel", "rad/s", {"kind": "joint", "quantity": "vel", "joints": [HINGE], "map": "identity"})]
    blocks = [{"name": name, "start": i, "stop": i + 1, "units": units,
               "frame": "joint space (pole angle 0: upright)", "source": source}
              for i, (name, units, source) in enumerate(one)]
    return {
        "robot_model": {"xml": xml, "sha256": hashlib.sha256(xml.encode()).hexdigest()},
        "clips": [],
        "timing": {"control_dt": cfg.ctrl_dt, "decimation": cfg.decimation,
                   "sim_timestep": float(env.backend.model.opt.timestep)},
        "observation": {"dim": len(blocks), "dtype": "float32", "blocks": blocks},
        "action": {"dim": 1, "clamp": [-1.0, 1.0], "actuation": "motor",
                   "channels": [{"joint": SLIDER, "actuator": "push", "default_pos": None, "offset": 0.0,
                                 "scale": 1.0, "kp": None, "kd": None, "effort_limit": None}]},
        "reset": {"kind": "joint_state", "qpos": [0.0, math.pi], "qvel": [0.0, 0.0],
                  "noise": {"qpos": [cfg.noise_position, cfg.noise_angle], "qvel": [cfg.noise_velocity] * 2}},
        "episode": {"end": "max_steps", "max_steps": int(round(run.env.episode_length_s / cfg.ctrl_dt))},
        "terminations": [{"kind": "joint_pos_beyond", "joint": SLIDER, "threshold": cfg.x_limit}],
        "metrics": {"kind": "survival"},
    }
