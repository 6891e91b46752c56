"""Build the G1 scene from the upstream `g1.xml` with MjSpec (docs/assets-and-tasks.md).

The upstream model has no actuators, armature, floor or keyframe; this adds
them so every backend simulates the same scene: a floor, implicitfast at
dt 0.005, foot contacts with condim 3 and friction 0.6 (other collision geoms
condim 1; contact condim is the max of the pair, so the floor keeps condim 1),
one position actuator per hinge joint with the motor table's armature, gains
and force limit, and a `home` keyframe at the default pose.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from soaklab.assets import g1

SCENE_NAME = "scene.xml"
HOME_KEY = "home"


def hinge_joints(spec: mujoco.MjSpec) -> list[mujoco.MjsJoint]:
    return [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_HINGE]


def build_scene_spec(robot_xml: Path) -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_file(str(robot_xml))
    spec.modelname = "g1_scene"
    spec.option.timestep = g1.PHYSICS_DT
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST

    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0.0, 0.0, 0.05],  # zero half-sizes: an infinite plane
        condim=g1.OTHER_CONDIM,
        friction=[g1.FOOT_FRICTION, 0.005, 0.0001],
        contype=1,
        conaffinity=1,
    )
    for geom in spec.geoms:
        if geom.name == "floor" or (geom.contype == 0 and geom.conaffinity == 0):
            continue  # visual-only geoms never collide
        if g1.FOOT_GEOM_PATTERN.match(geom.name):
            geom.condim = g1.FOOT_CONDIM
            geom.friction = [g1.FOOT_FRICTION, 0.005, 0.0001]
        else:
            geom.condim = g1.OTHER_CONDIM

    ctrl = []
    for joint in hinge_joints(spec):
        motor = g1.motor_class(joint.name)
        joint.armature = motor.armature
        act = spec.add_actuator(name=joint.name.removesuffix("_joint"), target=joint.name)
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.set_to_position(kp=motor.kp, kv=motor.kd)
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-motor.effort_limit, motor.effort_limit]
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
        ctrl.append(g1.default_joint_pos(joint.name))

    qpos = np.concatenate([[0.0, 0.0, g1.ROOT_HEIGHT, 1.0, 0.0, 0.0, 0.0], ctrl])
    spec.add_key(name=HOME_KEY, qpos=qpos.tolist(), ctrl=ctrl)
    return spec


def write_scene(robot_xml: Path) -> Path:
    """Write scene.xml beside g1.xml (mesh paths stay relative to that folder)."""
    spec = build_scene_spec(robot_xml)
    spec.compile()
    out = robot_xml.parent / SCENE_NAME
    out.write_text(spec.to_xml())
    return out


def load_scene(scene_xml: Path) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(scene_xml))
