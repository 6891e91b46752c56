"""G1 motion tracking's own resolution checks (soaklab.tasks.g1_tracking.resolve), through
`soaklab config resolve`: the scenes and clips a run will load, refused in one line before anything
is written. (A motion library's checks: test_library.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import one_line


def resolve(cli, g1_assets, tmp_path, *overrides):
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco",
                 "--out", out, "--assets-manifest", g1_assets.manifest_path, *overrides)
    return result, out


@pytest.mark.parametrize("motion, words", [
    ("{tmp}/nonexistent.npz", "does not exist"),
    ("{tmp}", "is not a regular file"),
    ("{tmp}/notes.txt", "not an NPZ archive"),
    ("{tmp}/other.npz", "invalid motion clip: missing key fps"),  # an NPZ, not a clip
    ("{tmp}/five_bodies.npz", "body_pos_w has shape (4, 5, 3)"),  # a clip of another robot
])
def test_a_clip_path_the_collector_could_not_load_is_refused_at_resolution(cli, g1_assets, tmp_path, motion, words):
    import numpy as np

    (tmp_path / "notes.txt").write_text("not a clip")
    np.savez(tmp_path / "other.npz", weights=np.zeros(3))
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (4, 5, 1))
    np.savez(tmp_path / "five_bodies.npz", fps=np.array(50.0), joint_pos=np.zeros((4, 29)), joint_vel=np.zeros((4, 29)),
             body_pos_w=np.zeros((4, 5, 3)), body_quat_w=quat, body_lin_vel_w=np.zeros((4, 5, 3)),
             body_ang_vel_w=np.zeros((4, 5, 3)))
    result, out = resolve(cli, g1_assets, tmp_path, f"env.motion={motion.format(tmp=tmp_path)}")
    assert result.code == 2
    line = one_line(result.err)
    assert "env.motion=" in line and words in line and "crawl_slope, largebox, synthetic" in line, line
    assert not out.exists()


def test_a_manifest_used_from_another_folder_is_refused_before_training(cli, pinned_wheel, tmp_path, monkeypatch):
    """A pull in one folder records paths relative to it; used from elsewhere, resolution and the
    trainer refuse it in one line naming the manifest and the scene, and no run dir appears."""
    pulled = tmp_path / "project"
    pulled.mkdir()
    monkeypatch.chdir(pulled)
    assert cli("assets", "pull", "--source", pinned_wheel, "--clip", "synthetic").code == 0
    manifest = pulled / "results" / "assets" / "manifest.json"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    run = ("--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco", "--assets-manifest", manifest)
    resolved = cli("config", "resolve", *run, "--out", elsewhere / "rc.json")
    trained = cli("train", *run, "algo.max_iterations=2", f"training.log_dir={elsewhere / 'run'}")
    for result in (resolved, trained):
        assert result.code == 2
        line = one_line(result.err)
        assert str(manifest) in line and "its scene resources/assets/g1/scene.xml does not exist" in line, line
    assert sorted(p.name for p in elsewhere.iterdir()) == []
    monkeypatch.chdir(pulled)  # from its own folder the same manifest resolves
    assert cli("config", "resolve", *run, "--out", pulled / "rc.json").code == 0


def test_a_scene_that_does_not_load_is_refused_at_resolution(cli, pinned_wheel, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("assets", "pull", "--source", pinned_wheel, "--clip", "synthetic").code == 0
    manifest = tmp_path / "results" / "assets" / "manifest.json"
    scene = Path(json.loads(manifest.read_text())["scene"]["path"])
    scene.write_text("<mujoco><worldbody><body></mujoco>")  # truncated by hand
    result = cli("config", "resolve", "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco",
                 "--assets-manifest", manifest, "--out", tmp_path / "rc.json")
    assert result.code == 2
    line = one_line(result.err)
    assert f"its scene {scene} does not load" in line and "pull again" in line, line
    assert not (tmp_path / "rc.json").exists()


@pytest.mark.parametrize("motion, words", [
    ("{tmp}/nonexistent.npz", "does not exist"),
    ("{tmp}", "is not a regular file"),
    ("{tmp}/notes.txt", "is not an NPZ archive"),
])
def test_a_bad_clip_path_is_refused_without_a_manifest_too(cli, tmp_path, motion, words):
    """A configuration-only resolution (no asset manifest, nothing to check the clip against) still
    refuses a clip path no run could load, in one line, writing nothing."""
    (tmp_path / "notes.txt").write_text("not a clip")
    out = tmp_path / "rc.json"
    result = cli("config", "resolve", "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco",
                 f"env.motion={motion.format(tmp=tmp_path)}", "--out", out)
    assert result.code == 2
    line = one_line(result.err)
    assert line.startswith("soaklab: error: env.motion=") and words in line, line
    assert "largebox, crawl_slope, synthetic" in line, line
    assert not out.exists()
