"""Motion clips: the synthetic clip passes the same validator as real ones; bad clips fail closed."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import mujoco
import numpy as np
import pytest

from soaklab.assets.motion import (
    SOFT_RANGE,
    generate_synthetic_clip,
    load_motion,
    robot_body_names,
    save_motion,
)
from soaklab.assets.scene import load_scene
from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import sha256_file
from tests.conftest import one_line


@pytest.fixture(scope="module")
def model(g1_assets):
    return load_scene(g1_assets.scene)


@pytest.fixture(scope="module")
def clip(g1_assets, model):
    return load_motion(g1_assets.synthetic, model)


def test_synthetic_clip_loads_through_the_validator(clip, model, g1_assets):
    assert clip.num_frames == g1_assets.manifest["motions"]["synthetic"]["frames"] == 601
    assert clip.fps == 50.0
    assert clip.body_pos_w.shape == (601, model.nbody - 1, 3)
    assert list(clip.body_names) == robot_body_names(model)


def test_synthetic_clip_is_deterministic(model, tmp_path, g1_assets):
    path = tmp_path / "again.npz"
    save_motion(generate_synthetic_clip(model), path)
    assert sha256_file(path) == g1_assets.manifest["motions"]["synthetic"]["sha256"]


@pytest.mark.parametrize("which", ["synthetic", "largebox"])
def test_every_clip_keeps_its_feet_near_the_floor_and_joints_in_range(which, g1_assets, model):
    """Both references are reachable: joints inside their limits, the lowest foot point within
    2 cm of the floor in every frame (so tracking them does not ask the robot to float or sink)."""
    from soaklab.assets import g1
    from soaklab.assets.motion import _lowest_foot_point

    ref = load_motion(Path(g1_assets.manifest["motions"][which]["path"]), model)
    lo, hi = model.jnt_range[1:, 0], model.jnt_range[1:, 1]
    assert ((ref.joint_pos >= lo - 1e-4) & (ref.joint_pos <= hi + 1e-4)).all()
    data = mujoco.MjData(model)
    feet = [g for g in range(model.ngeom)
            if g1.FOOT_GEOM_PATTERN.match(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "")]
    for t in range(0, ref.num_frames, 10):
        data.qpos[:3], data.qpos[3:7], data.qpos[7:] = ref.body_pos_w[t, 0], ref.body_quat_w[t, 0], ref.joint_pos[t]
        mujoco.mj_kinematics(model, data)
        assert abs(_lowest_foot_point(model, data, feet)) < 0.02, (which, t)


def test_joints_stay_inside_the_soft_range(clip, model):
    lo, hi = model.jnt_range[1:, 0], model.jnt_range[1:, 1]
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    assert (np.abs(clip.joint_pos - mid) <= SOFT_RANGE * half + 1e-5).all()


def test_feet_stay_on_the_floor(clip, model):
    data = mujoco.MjData(model)
    feet = [g for g in range(model.ngeom) if "foot" in (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "")]
    root = np.zeros(7)
    for t in range(0, clip.num_frames, 50):
        pelvis_pos, pelvis_quat = clip.body_pos_w[t, 0], clip.body_quat_w[t, 0]
        # the pelvis body frame is the free joint frame, so the clip's pelvis pose is the root pose
        root[:3], root[3:] = pelvis_pos, pelvis_quat
        data.qpos[:] = np.concatenate([root, clip.joint_pos[t]])
        mujoco.mj_kinematics(model, data)
        lowest = min(data.geom_xpos[g][2] - abs(data.geom_xmat[g].reshape(3, 3)[2, 2]) * model.geom_size[g, 1]
                     - model.geom_size[g, 0] for g in feet)
        assert abs(lowest) < 1e-4, (t, lowest)
        np.testing.assert_allclose(data.xpos[1:], clip.body_pos_w[t], atol=1e-5)


def test_velocities_match_positions(clip):
    dt = 1 / clip.fps
    numeric = (clip.body_pos_w[2:] - clip.body_pos_w[:-2]) / (2 * dt)
    np.testing.assert_allclose(clip.body_lin_vel_w[1:-1], numeric, atol=1e-3)


def _write(path, **arrays):
    np.savez(path, **arrays)
    return path


def _arrays(clip):
    return {"fps": np.float64(clip.fps), "joint_pos": clip.joint_pos, "joint_vel": clip.joint_vel,
            "body_pos_w": clip.body_pos_w, "body_quat_w": clip.body_quat_w,
            "body_lin_vel_w": clip.body_lin_vel_w, "body_ang_vel_w": clip.body_ang_vel_w}


@pytest.mark.parametrize(("mutate", "words"), [
    (lambda a: a.pop("body_quat_w"), "missing key body_quat_w"),
    (lambda a: a.update(joint_pos=a["joint_pos"][:, :28]), "joint_pos has shape"),
    (lambda a: a.update(joint_vel=a["joint_vel"][:-1]), "joint_vel has shape"),
    (lambda a: a.update(body_pos_w=a["body_pos_w"][:, :14]), "body_pos_w has shape"),
    (lambda a: a["body_lin_vel_w"].__setitem__((3, 2, 1), np.nan), "body_lin_vel_w must hold finite"),
    (lambda a: a.update(fps=np.float64(0)), "fps must be one positive number"),
    (lambda a: a.update(body_quat_w=a["body_quat_w"] * 2), "unit quaternions"),
    (lambda a: a.update(body_names=np.array(["x"] * a["body_pos_w"].shape[1])), "body_names differ"),
])
def test_bad_clip_fails_closed_naming_file_and_key(clip, model, tmp_path, mutate, words):
    arrays = {k: np.array(v, copy=True) for k, v in _arrays(clip).items()}
    mutate(arrays)
    path = _write(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InvalidInput) as info:
        load_motion(path, model)
    assert str(path) in str(info.value) and words in str(info.value)


def test_not_a_zip_fails_closed(model, tmp_path):
    path = tmp_path / "clip.npz"
    path.write_bytes(b"not an npz")
    with pytest.raises(InvalidInput, match="cannot read NPZ"):
        load_motion(path, model)


def test_saved_npz_has_fixed_timestamps(g1_assets):
    with zipfile.ZipFile(g1_assets.motion) as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def _forged(clip, path: Path, shape: tuple[int, ...], holds: int = 64) -> Path:
    """The clip as an NPZ whose joint_pos member's .npy header claims `shape` and holds `holds` bytes."""
    _write(path, **{k: v for k, v in _arrays(clip).items() if k != "joint_pos"})
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("joint_pos.npy", header.getvalue() + b"\0" * holds)
    return path


def test_a_header_that_claims_terabytes_is_refused_before_anything_is_read(clip, model, tmp_path, cli, g1_assets):
    path = _forged(clip, tmp_path / "huge.npz", (2 ** 37, 29))  # 29 TiB declared, 64 bytes held
    with pytest.raises(InvalidInput) as info:
        load_motion(path, model)
    text = str(info.value)
    assert str(path) in text and "member joint_pos.npy declares 31,885,837,205,504 bytes" in text
    # a header that fits the limit but claims more than its member holds is refused the same way
    with pytest.raises(InvalidInput, match="declares 464 bytes .* and holds"):
        load_motion(_forged(clip, tmp_path / "short.npz", (2, 29), holds=8), model)
    # through the command line: one line, exit 2, nothing written
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", "--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco",
                 f"env.motion={path}", "--assets-manifest", g1_assets.manifest_path, "--out", out)
    assert result.code == 2 and "declares 31,885,837,205,504 bytes" in one_line(result.err) and not out.exists()
