"""`soaklab config resolve` with an asset manifest: which clip a run tracks, and cross-key checks."""

from __future__ import annotations

import json

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
    assert set(record["run"]["assets"]["motions"]) == {"largebox", "synthetic"}
    own = tmp_path / "mine.npz"
    result, out = resolve(cli, g1_assets, tmp_path, f"env.motion={own}")
    assert json.loads(out.read_text())["config"]["env"]["motion"] == str(own)


def test_bad_action_bounds_and_warmup_fail_closed(cli, g1_assets, tmp_path):
    for bad, key in (("task.action_bounds=wide", "task.action_bounds"), ("algo.warmup_actions=none",
                                                                        "algo.warmup_actions")):
        result, out = resolve(cli, g1_assets, tmp_path, bad)
        assert result.code == 2 and key in one_line(result.err) and not out.exists()
