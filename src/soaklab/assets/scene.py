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
from soaklab.errors import InvalidInput

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


# What a static geom copied from one scene into another keeps: everything MJCF can say of a plain
# geom (its mesh by name; the meshes themselves are copied first).
GEOM_FIELDS = ("type", "size", "pos", "quat", "meshname", "condim", "contype", "conaffinity", "friction", "priority",
               "solref", "solimp", "solmix", "margin", "gap", "rgba", "group", "material")
MESH_FIELDS = ("uservert", "userface", "scale", "refpos", "refquat", "inertia")


def world_geoms(spec: mujoco.MjSpec) -> list[str]:
    """The names of the geoms of the world body (the floor, a clip's terrain), in order."""
    return [g.name for g in spec.worldbody.geoms]


def union_scene(scene_paths: list[Path]) -> tuple[mujoco.MjSpec, list[frozenset[str]]]:
    """One scene holding every scene's world geoms: the first scene, plus each other scene's world
    geoms (a clip's terrain) it lacks, in scene order; and each scene's own world geoms, so a world
    of the set knows which of the union's are not its own (soaklab.sim `absent_geoms`). Every scene
    must be the same robot: the same bodies, joints and actuators (a terrain clip's scene is the G1
    scene plus its terrain, soaklab.assets.terrain)."""
    spec = mujoco.MjSpec.from_file(str(scene_paths[0]))
    own = [frozenset(world_geoms(spec))]
    robot = _robot_of(spec)
    for path in scene_paths[1:]:
        other = mujoco.MjSpec.from_file(str(path))
        if _robot_of(other) != robot:
            raise InvalidInput(f"{path}: not the robot of {scene_paths[0]} (bodies, joints or actuators differ); "
                               "a motion library's clips must share one robot: pull the assets again")
        have = set(world_geoms(spec))
        for geom in other.worldbody.geoms:
            if geom.name not in have:
                _copy_geom(spec, other, geom)
        own.append(frozenset(world_geoms(other)))
    return spec, own


def _robot_of(spec: mujoco.MjSpec) -> tuple[tuple[str, ...], ...]:
    return (tuple(b.name for b in spec.bodies if b.name != "world"), tuple(j.name for j in spec.joints),
            tuple(a.name for a in spec.actuators))


def _copy_geom(spec: mujoco.MjSpec, source: mujoco.MjSpec, geom: mujoco.MjsGeom) -> None:
    if not geom.name:
        raise InvalidInput("an unnamed world geom in a clip's scene cannot be told apart between scenes; "
                           "pull the assets again")
    if geom.type == mujoco.mjtGeom.mjGEOM_MESH and spec.mesh(geom.meshname) is None:
        mesh, copy = source.mesh(geom.meshname), spec.add_mesh(name=geom.meshname)
        if mesh.file:
            raise InvalidInput(f"mesh {geom.meshname!r} of a clip's scene is a file; a motion library copies inline "
                               "meshes only (a pulled terrain's): pull the assets again")
        for field in MESH_FIELDS:
            setattr(copy, field, getattr(mesh, field))
    copy = spec.worldbody.add_geom(name=geom.name)
    for field in GEOM_FIELDS:
        setattr(copy, field, getattr(geom, field))
