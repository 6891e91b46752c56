"""`soaklab config resolve` with an asset manifest: which clip a run tracks, and cross-key checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from soaklab.config.host import simulated_host
from soaklab.config.resolve import load
from soaklab.errors import InvalidInput
from tests.conftest import one_line


def resolve(cli, g1_assets, tmp_path, *overrides):
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco",
                 "--out", out, "--assets-manifest", g1_assets.manifest_path, *overrides)
    return result, out


def test_env_motion_picks_the_manifests_default_a_named_clip_or_a_path(cli, g1_assets, tmp_path):
    result, out = resolve(cli, g1_assets, tmp_path)
    assert result.code == 0, result.err
    assert json.loads(out.read_text())["config"]["env"]["motion"] == str(g1_assets.motion)  # largebox
    result, out = resolve(cli, g1_assets, tmp_path, "env.motion=synthetic")
    assert result.code == 0, result.err
    record = json.loads(out.read_text())
    assert record["config"]["env"]["motion"] == str(g1_assets.synthetic)
    assert set(record["run"]["assets"]["motions"]) == {"largebox", "crawl_slope", "synthetic"}
    own = tmp_path / "mine.npz"
    shutil.copyfile(g1_assets.synthetic, own)  # a clip of one's own: it must exist (checked at resolution)
    result, out = resolve(cli, g1_assets, tmp_path, f"env.motion={own}")
    assert json.loads(out.read_text())["config"]["env"]["motion"] == str(own)


def test_a_terrain_clip_brings_its_scene_to_the_run_and_to_the_trained_run(cli, g1_assets, tmp_path):
    from soaklab.config.run_config import scene_of
    from soaklab.tasks.env import EnvSpec
    from soaklab.tasks.registry import make_env

    crawl = g1_assets.manifest["motions"]["crawl_slope"]
    result, out = resolve(cli, g1_assets, tmp_path, "env.motion=crawl_slope", "algo.num_envs=2")
    assert result.code == 0, result.err
    record = json.loads(out.read_text())
    assets = record["run"]["assets"]
    assert scene_of(assets, record["config"]["env"]["motion"]) == crawl["scene"]["path"]
    assert scene_of(assets, str(g1_assets.motion)) == str(g1_assets.scene)  # largebox: the plain scene
    from soaklab.contract.sections import RunConfig

    run = RunConfig.of(record["config"], record["algo"])
    env = make_env("g1_motion_tracking", run, EnvSpec.of(run), Path(crawl["scene"]["path"]), compile_terms=False)
    model = env.backend.model
    assert sum(model.geom(i).name.startswith("terrain_crawl_slope") for i in range(model.ngeom)) == 2
    env.close()


def test_bad_action_bounds_and_warmup_fail_closed(cli, g1_assets, tmp_path):
    for bad, key in (("task.action_bounds=wide", "task.action_bounds"),
                     ("algo.warmup_actions=none", "algo.warmup_actions"),
                     ("algo.alpha_init=0.0", "algo.alpha_init"), ("algo.alpha_init=-1", "algo.alpha_init"),
                     ("algo.log_std_min=1.0", "algo.log_std_min"), ("algo.n_step=0", "algo.n_step")):
        result, out = resolve(cli, g1_assets, tmp_path, bad)
        assert result.code == 2 and key in one_line(result.err) and not out.exists()


def test_seeds_beyond_the_contract_fail_before_anything_is_spawned(cli, g1_assets, tmp_path):
    """2**63 used to pass resolution and fail in the collector (exit 1, after spawning)."""
    for key in ("env.seed", "algo.seed"):
        result, out = resolve(cli, g1_assets, tmp_path, f"{key}=9223372036854775808")
        assert result.code == 2 and not out.exists()
        line = one_line(result.err)
        assert key in line and "9223372036854775807" in line
        result, out = resolve(cli, g1_assets, tmp_path, f"{key}=9223372036854775807")
        assert result.code == 0, result.err
        out.unlink()


TWO_GPUS = json.dumps({"cuda_device_count": 2, "cuda_free_bytes": [140 * 2**30, 140 * 2**30]})
ONE_GPU = json.dumps({"cuda_device_count": 1, "cuda_free_bytes": [140 * 2**30]})
CUDA_CARTPOLE = ("--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco", "training.device=cuda")


def test_ranks_are_resolved_once_and_rechecked_on_load(cli, tmp_path):
    """Two visible GPUs and a plain `cuda` learner: two ranks, in the record; a host with one GPU
    refuses to load that record (it would run a different number of ranks)."""
    out = tmp_path / "run_config.json"
    assert cli("config", "resolve", *CUDA_CARTPOLE, "--out", out, host=TWO_GPUS).code == 0
    record = json.loads(out.read_text())
    assert record["run"]["data_parallel"]["ranks"] == {"configured": None, "resolved": 2}
    assert record["run"]["data_parallel"]["backend"] == "nccl"
    with pytest.raises(InvalidInput, match="data_parallel differs on this host"):
        load(out, simulated_host(ONE_GPU))


def test_mps_with_several_ranks_fails_closed(cli, g1_assets, tmp_path):
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mjwarp",
                 "--assets-manifest", g1_assets.manifest_path, "training.cuda_process_sharing=mps", "--out", out,
                 host=TWO_GPUS)
    assert result.code == 2
    assert one_line(result.err).startswith("soaklab: error: training.cuda_process_sharing='mps'")
    assert "2 data-parallel ranks" in result.err and not out.exists()


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
