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
    from soaklab.assets.record import scene_of
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

    run = RunConfig.of(record["config"], record["algo"], record["task"])
    env = make_env(run, EnvSpec.of(run), Path(crawl["scene"]["path"]), compile_terms=False)
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
