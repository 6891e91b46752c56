"""The materialized G1 scene: dimensions, the motor table, contacts, and 5 s of stable hold; a motion
library's union of its clips' scenes."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from soaklab.assets import g1
from soaklab.assets.scene import HOME_KEY, load_scene, union_scene
from soaklab.errors import InvalidInput

# docs/assets-and-tasks.md, as printed: joints -> armature, kp, kd, effort limit, action scale.
TABLE = [
    (r"shoulder_pitch", 0.003610, 14.25, 0.907, 25, 0.4386),
    (r"shoulder_roll", 0.003610, 14.25, 0.907, 25, 0.4386),
    (r"shoulder_yaw", 0.003610, 14.25, 0.907, 25, 0.4386),
    (r"elbow", 0.003610, 14.25, 0.907, 25, 0.4386),
    (r"wrist_roll", 0.003610, 14.25, 0.907, 25, 0.4386),
    (r"hip_pitch", 0.010178, 40.18, 2.558, 88, 0.5475),
    (r"hip_yaw", 0.010178, 40.18, 2.558, 88, 0.5475),
    (r"waist_yaw", 0.010178, 40.18, 2.558, 88, 0.5475),
    (r"hip_roll", 0.025102, 99.10, 6.309, 139, 0.3507),
    (r"knee", 0.025102, 99.10, 6.309, 139, 0.3507),
    (r"wrist_pitch", 0.004250, 16.78, 1.068, 5, 0.0745),
    (r"wrist_yaw", 0.004250, 16.78, 1.068, 5, 0.0745),
    (r"waist_pitch", 0.007219, 28.50, 1.814, 50, 0.4386),
    (r"waist_roll", 0.007219, 28.50, 1.814, 50, 0.4386),
    (r"ankle_pitch", 0.007219, 28.50, 1.814, 50, 0.4386),
    (r"ankle_roll", 0.007219, 28.50, 1.814, 50, 0.4386),
]
DEFAULT_POSE = {"left_hip_pitch_joint": -0.312, "right_knee_joint": 0.669, "left_ankle_pitch_joint": -0.363,
                "right_elbow_joint": 0.6, "left_shoulder_pitch_joint": 0.2, "left_shoulder_roll_joint": 0.2,
                "right_shoulder_roll_joint": -0.2, "waist_yaw_joint": 0.0, "left_wrist_roll_joint": 0.0}


@pytest.fixture(scope="module")
def model(g1_assets):
    return load_scene(g1_assets.scene)


def test_dimensions_and_options(model):
    assert (model.nq, model.nv, model.nu) == (36, 35, 29)
    assert model.opt.timestep == pytest.approx(0.005)
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST


@pytest.mark.parametrize(("pattern", "armature", "kp", "kd", "effort", "scale"), TABLE)
def test_motor_table(model, pattern, armature, kp, kd, effort, scale):
    joints = [j for j in range(1, model.njnt) if pattern in mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)]
    assert joints, pattern
    for j in joints:
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        act = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name.removesuffix("_joint"))
        assert model.actuator_trnid[act, 0] == j
        assert model.dof_armature[model.jnt_dofadr[j]] == pytest.approx(armature)
        assert model.actuator_gainprm[act, 0] == pytest.approx(kp, abs=0.01)
        assert model.actuator_biasprm[act, 1] == pytest.approx(-kp, abs=0.01)
        assert model.actuator_biasprm[act, 2] == pytest.approx(-kd, abs=0.001)
        assert tuple(model.actuator_forcerange[act]) == (-effort, effort)
        assert g1.motor_class(name).action_scale == pytest.approx(scale, abs=1e-4)


def test_contacts_and_floor(model):
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(model.ngeom)]
    floor = names.index("floor")
    assert model.geom_type[floor] == mujoco.mjtGeom.mjGEOM_PLANE
    feet = [g for g, n in enumerate(names) if g1.FOOT_GEOM_PATTERN.match(n)]
    assert len(feet) == 14
    for g in feet:
        assert model.geom_condim[g] == 3 and model.geom_friction[g, 0] == pytest.approx(0.6)
    others = [g for g in range(model.ngeom) if g not in feet and model.geom_contype[g] | model.geom_conaffinity[g]]
    assert others and all(model.geom_condim[g] == 1 for g in others)


def test_home_keyframe_is_the_default_pose(model):
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, HOME_KEY)
    qpos = model.key_qpos[key]
    assert qpos[2] == pytest.approx(0.76) and tuple(qpos[3:7]) == (1, 0, 0, 0)
    for joint, value in DEFAULT_POSE.items():
        j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        assert qpos[model.jnt_qposadr[j]] == pytest.approx(value)
    np.testing.assert_allclose(model.key_ctrl[key], qpos[7:])


def test_holding_the_default_pose_simulates_5s_stably(model):
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    steps = int(round(5.0 / model.opt.timestep))
    for _ in range(steps):
        mujoco.mj_step(model, data)
    assert data.time == pytest.approx(5.0)
    assert np.isfinite(data.qpos).all() and np.isfinite(data.qvel).all()
    assert [w.number for w in data.warning] == [0] * len(data.warning)
    assert math.isfinite(float(np.abs(data.qacc).max()))


def test_the_union_of_the_clips_scenes_is_each_scene_with_the_others_world_geoms(g1_assets, tmp_path):
    """A motion library's model (soaklab.assets.scene.union_scene): the plain scene plus crawl_slope's
    terrain is crawl_slope's own scene, geom for geom; each scene's own world geoms are named; a scene
    of another robot is refused in one line."""
    crawl = g1_assets.scene.parent / "scene_crawl_slope.xml"
    spec, own = union_scene([g1_assets.scene, crawl])
    union, alone = spec.compile(), mujoco.MjModel.from_xml_path(str(crawl))
    assert own == [frozenset({"floor"}), frozenset({"floor", "terrain_crawl_slope_0", "terrain_crawl_slope_1"})]
    for field in ("geom_type", "geom_pos", "geom_quat", "geom_size", "geom_friction", "geom_condim", "geom_contype",
                  "geom_conaffinity", "geom_aabb", "geom_rbound", "mesh_vert", "body_mass"):
        assert np.array_equal(getattr(union, field), getattr(alone, field)), field
    other = mujoco.MjSpec.from_file(str(g1_assets.scene))
    other.worldbody.add_body(name="another_body").add_geom(size=[0.1, 0, 0])
    other.meshdir = str(g1_assets.scene.parent / other.meshdir)  # its meshes, from another folder
    other.compile()
    (tmp_path / "other_robot.xml").write_text(other.to_xml())
    with pytest.raises(InvalidInput, match="not the robot of .*a motion library's clips must share one robot"):
        union_scene([g1_assets.scene, tmp_path / "other_robot.xml"])
