"""Feed a soaklab policy from another program: onnxruntime, MuJoCo and numpy only (docs/export.md).

    python examples/feed_policy.py policy.onnx [--steps 50]

Everything comes from the contract in the ONNX file's metadata: the robot model (and, for a tracking
policy, the reference clip) it names, how each observation block is computed, how each action
becomes an actuator's control, the control step. The robot starts from the contract's reset without
noise (a tracking policy: the clip's first frame) and the policy drives it for --steps control
steps. The first observations are checked against the probe the contract carries, the observations
the policy met in soaklab: an observation built wrongly shows there before the robot moves.
"""

from __future__ import annotations

import argparse
import json
import math
import os

import mujoco
import numpy as np
import onnxruntime


def rotate_inverse(quat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """`vec` (world frame) in the frame of the body whose orientation is `quat` (wxyz)."""
    inverse, out = np.zeros(4), np.zeros(3)
    mujoco.mju_negQuat(inverse, quat)
    mujoco.mju_rotVecQuat(out, vec, inverse)
    return out


def relative_quat(robot: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The reference orientation in the robot body's frame: conj(robot) * ref."""
    inverse, out = np.zeros(4), np.zeros(4)
    mujoco.mju_negQuat(inverse, robot)
    mujoco.mju_mulQuat(out, inverse, ref)
    return out


class Robot:
    def __init__(self, contract: dict, assets: str) -> None:
        self.c = contract
        clip = contract["clips"][0] if contract["clips"] else None
        # A model built in code travels inside the contract; an asset model is named by its path in the
        # asset tree and its hash (a real deployment checks the SHA-256, as `soaklab deploy-check` does).
        model = contract["robot_model"] if clip is None else clip["scene"]
        self.m = (mujoco.MjModel.from_xml_string(model["xml"]) if "xml" in model
                  else mujoco.MjModel.from_xml_path(os.path.join(assets, model["path"])))
        self.d = mujoco.MjData(self.m)
        self.clip = dict(np.load(os.path.join(assets, clip["path"]))) if clip else None
        channels = contract["action"]["channels"]
        self.joints = [self.m.joint(ch["joint"]) for ch in channels]
        self.actuators = [self.m.actuator(ch["actuator"]).id for ch in channels]
        self.offset = np.array([ch["offset"] for ch in channels])
        self.scale = np.array([ch["scale"] for ch in channels])
        self.default = np.array([ch["default_pos"] or 0.0 for ch in channels])
        self.last_action = np.zeros(len(channels))
        self.step_count = 0

    def clip_frame(self) -> int:
        fps = float(np.asarray(self.clip["fps"]).reshape(-1)[0])
        frame = math.floor(self.step_count * fps * self.c["timing"]["control_dt"] + 0.5)
        return min(frame, len(self.clip["joint_pos"]) - 1)

    def column(self, joint: mujoco._structs._MjModelJointViews) -> int:
        """A joint's column in a clip: clips hold the model's non-free joints in model order."""
        return joint.id - (1 if self.m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE else 0)

    def reset(self) -> None:
        reset = self.c["reset"]
        if reset["kind"] == "joint_state":
            self.d.qpos[:], self.d.qvel[:] = reset["qpos"], reset["qvel"]
        else:  # the clip's first frame: the root body's pose and velocity, the joints'
            root = self.m.body(reset["root_body"]).id - 1  # clips hold every body but the world
            quat = self.clip["body_quat_w"][0, root]
            self.d.qpos[:7] = np.concatenate([self.clip["body_pos_w"][0, root], quat])
            self.d.qvel[:3] = self.clip["body_lin_vel_w"][0, root]
            self.d.qvel[3:6] = rotate_inverse(quat, self.clip["body_ang_vel_w"][0, root])  # free joint: body frame
            self.d.qpos[7:], self.d.qvel[6:] = self.clip["joint_pos"][0], self.clip["joint_vel"][0]
        mujoco.mj_forward(self.m, self.d)

    def block(self, source: dict) -> np.ndarray:
        kind = source["kind"]
        if kind == "last_action":
            return self.last_action
        if kind == "joint":
            joints = self.joints if source["joints"] == "action" else [self.m.joint(n) for n in source["joints"]]
            values = np.array([self.d.qpos[j.qposadr[0]] if source["quantity"] == "pos" else self.d.qvel[j.dofadr[0]]
                               for j in joints])
            return {"identity": values, "minus_default": values - self.default, "cos": np.cos(values),
                    "sin": np.sin(values)}[source["map"]]
        frame = self.clip_frame() if self.clip else 0
        if kind == "clip":  # the clip's joints, in action order
            return self.clip[source["field"]][frame, [self.column(j) for j in self.joints]]
        body = self.m.body(source["body"]).id
        pos, quat = self.d.xpos[body], self.d.xquat[body]
        if kind == "body_velocity":
            velocity = np.zeros(6)  # angular, then linear, world frame
            mujoco.mj_objectVelocity(self.m, self.d, mujoco.mjtObj.mjOBJ_XBODY, body, velocity, 0)
            return rotate_inverse(quat, velocity[3:] if source["quantity"] == "lin" else velocity[:3])
        # clip_body_in_robot_body_frame: the clip's body relative to the robot's, in the robot's frame
        if source["quantity"] == "pos":
            return rotate_inverse(quat, self.clip["body_pos_w"][frame, body - 1] - pos)
        rotation = np.zeros(9)
        mujoco.mju_quat2Mat(rotation, relative_quat(quat, self.clip["body_quat_w"][frame, body - 1]))
        return rotation.reshape(3, 3)[:, :2].reshape(-1)  # the first two columns, row-major

    def observation(self) -> np.ndarray:
        obs = np.zeros(self.c["observation"]["dim"], dtype=np.float32)
        for b in self.c["observation"]["blocks"]:
            obs[b["start"]:b["stop"]] = self.block(b["source"])
        return obs

    def act(self, action: np.ndarray) -> None:
        clamp = self.c["action"]["clamp"]
        if clamp is not None:
            action = np.clip(action, *clamp)
        self.d.ctrl[self.actuators] = self.offset + self.scale * action  # position targets (PD in the model)
        mujoco.mj_step(self.m, self.d, nstep=self.c["timing"]["decimation"])
        mujoco.mj_step1(self.m, self.d)  # body frames and velocities of the state just reached
        self.last_action = action
        self.step_count += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("onnx")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--assets", default="resources/assets", help="the asset tree the contract's paths are in")
    args = parser.parse_args()
    session = onnxruntime.InferenceSession(args.onnx, providers=["CPUExecutionProvider"])
    metadata = session.get_modelmeta().custom_metadata_map
    if "soaklab.contract" not in metadata:
        print(f"{args.onnx}: no policy contract in its metadata")
        return 2
    contract = json.loads(metadata["soaklab.contract"])
    robot = Robot(contract, args.assets)
    robot.reset()
    probe, worst = contract["probe"], 0.0
    for step in range(args.steps):
        obs = robot.observation()
        if step < len(probe["observations"]):
            want = np.array(probe["observations"][step])
            worst = max(worst, float((np.abs(obs - want) / (1.0 + np.abs(want))).max()))
        action = session.run(None, {"obs": obs[None]})[0][0]
        robot.act(action)
    verdict = "match" if worst <= probe["tolerance"] else "DO NOT MATCH"
    print(f"{contract['task']}: {args.steps} control steps of {contract['timing']['control_dt']} s; the first "
          f"{len(probe['observations'])} observations {verdict} the contract's probe (largest relative "
          f"difference {worst:.1e}, tolerance {probe['tolerance']:.0e}); "
          f"qpos[:3] {np.round(robot.d.qpos[:3], 3).tolist()}")
    return 0 if worst <= probe["tolerance"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
