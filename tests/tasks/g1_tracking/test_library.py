"""env.motion as a list: the envs spread over the clips in blocks, each block a whole tracking env
with its own clip, scene (crawl_slope's terrain) and sampler; per-clip metrics through a real
trainer's event file; evaluation per clip; the refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from soaklab.contract.layout import block_sizes
from soaklab.contract.sections import RunConfig
from soaklab.metrics.events import current_tags, event_file, read_scalars
from soaklab.tasks.env import EnvSpec
from soaklab.tasks.g1_tracking.library import MotionLibraryEnv
from soaklab.tasks.registry import make_env, step_metrics
from tests.conftest import one_line
from tests.policy.test_export import FAST, QUIET

RUN = ("--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco")


def test_blocks_are_as_even_as_can_be():
    assert block_sizes(10, 3) == [4, 3, 3] and block_sizes(2, 2) == [1, 1] and block_sizes(7, 1) == [7]


def test_weighted_blocks_follow_the_weights_and_keep_every_env():
    assert block_sizes(10, 2, (1.0, 3.0)) == [3, 7]  # 2.5 and 7.5: the tie goes to the first
    assert block_sizes(10, 3, (1.0, 1.0, 1.0)) == block_sizes(10, 3), "equal weights are the even split"
    assert block_sizes(1024, 2, (1.0, 2.0)) == [341, 683]
    for n in (2, 7, 1000, 1023):
        assert sum(block_sizes(n, 3, (0.2, 0.5, 0.3))) == n


def test_weights_decide_the_blocks_of_a_library_env(cli, g1_assets, tmp_path):
    from soaklab.assets.record import scene_for_env
    from soaklab.tasks.env import EnvSpec

    record = resolved_config(cli, g1_assets, tmp_path, "env.motion=[largebox,crawl_slope]", "algo.num_envs=8",
                             "env.motion_weights=[1,3]")
    assert record["config"]["env"]["motion_weights"] == [1, 3]
    run = RunConfig.of(record["config"], record["algo"], record["task"])
    env = make_env(run, EnvSpec.of(run),
                   scene_for_env(record["run"]["assets"], record["config"]["env"]["motion"]), compile_terms=False)
    try:
        assert [e.num_envs for e in env.envs] == [2, 6]
        assert env.diagnostics()["motion_library"] == {"largebox": {"envs": 2}, "crawl_slope": {"envs": 6}}
    finally:
        env.close()


def resolved_config(cli, g1_assets, tmp_path, *overrides: str) -> dict:
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", *RUN, "--assets-manifest", g1_assets.manifest_path, "--out", out, *overrides)
    assert result.code == 0, result.err
    return json.loads(out.read_text())


def test_each_block_tracks_its_clip_on_its_own_scene(cli, g1_assets, tmp_path):
    from soaklab.assets.record import scene_for_env

    record = resolved_config(cli, g1_assets, tmp_path, "env.motion=[largebox,crawl_slope]", "algo.num_envs=5")
    motion = record["config"]["env"]["motion"]
    run = RunConfig.of(record["config"], record["algo"], record["task"])
    env = make_env(run, EnvSpec.of(run), scene_for_env(record["run"]["assets"], motion),
                   compile_terms=False)
    try:
        assert isinstance(env, MotionLibraryEnv) and env.labels == ("largebox", "crawl_slope")
        assert [e.num_envs for e in env.envs] == [3, 2] and env.num_envs == 5
        terrain = [sum(e.backend.model.geom(i).name.startswith("terrain_") for i in range(e.backend.model.ngeom))
                   for e in env.envs]
        assert terrain == [0, 2]  # only crawl_slope's block stands on its terrain
        assert [e.clip.num_frames for e in env.envs] == [325, 959]
        obs, critic = env.reset()
        assert obs.shape == (5, env.spaces.actor_obs) and critic.shape == (5, env.spaces.critic_obs)
        result = env.step(torch.zeros(5, env.spaces.action))
        assert result.reward.shape == (5,) and result.clips == (("largebox", slice(0, 3)), ("crawl_slope", slice(3, 5)))
        values = step_metrics(result)
        assert values["clip/largebox/tracking/body_pos_error_m"].shape == (3,)
        assert values["clip/crawl_slope/episodes/terminated"].shape == (2,)
        assert torch.equal(values["clip/crawl_slope/tracking/body_pos_error_m"],
                           values["tracking/body_pos_error_m"][3:])
        assert env.diagnostics()["motion_library"] == {"largebox": {"envs": 3}, "crawl_slope": {"envs": 2}}
    finally:
        env.close()


@pytest.mark.parametrize(("overrides", "line"), [
    (("env.motion=[]",), "env.motion=[]: must be a clip (a name or an NPZ path) or a non-empty list of distinct clips"),
    (("env.motion=[largebox,largebox]",), "a non-empty list of distinct clips"),
    (("env.motion=[largebox,crawl_slope]", "algo.num_envs=1"),
     "algo.num_envs=1: must be >= the 2 clips of env.motion (each clip tracks a block of envs)"),
    (("env.motion=[largebox,{tmp}/largebox.npz]",), "two clips share the label 'largebox'"),
    (("env.motion=[largebox,{tmp}/missing.npz]",), "missing.npz does not exist"),
    (("env.motion_weights=[1,3]",), "env.motion_weights=[1, 3]: weighs a motion library's clips"),
    (("env.motion=[largebox,crawl_slope]", "env.motion_weights=[1]"),
     "must be a list of 2 positive numbers, one per clip of env.motion"),
    (("env.motion=[largebox,crawl_slope]", "env.motion_weights=[1,0]"), "(0 is not)"),
    (("env.motion=[largebox,crawl_slope]", "env.motion_weights=[1,true]"), "(True is not)"),
    (("env.motion=[largebox,crawl_slope]", "env.motion_weights=[1,.inf]"), "(inf is not)"),
    (("env.motion=[largebox,crawl_slope]", "env.motion_weights=[1,100]", "algo.num_envs=20"),
     "gives a clip no env of algo.num_envs=20 (blocks [0, 20])"),
    (("task.sampler_settings.first_frame_ratio=1.5",), "task.sampler_settings.first_frame_ratio=1.5"),
])
def test_a_bad_library_is_refused_in_one_line_and_nothing_is_written(cli, g1_assets, tmp_path, overrides, line):
    (tmp_path / "largebox.npz").write_bytes(g1_assets.motion.read_bytes())
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", *RUN, "--assets-manifest", g1_assets.manifest_path, "--out", out,
                 *(o.format(tmp=tmp_path) for o in overrides))
    assert result.code == 2
    assert line in one_line(result.err)
    assert not out.exists()


def test_a_library_needs_the_tracking_task(cli, tmp_path):
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco",
                 "--out", out, "env.motion=[largebox,crawl_slope]")
    assert result.code == 2 and "needs a tracking task (g1_motion_tracking)" in one_line(result.err)
    assert not out.exists()


@pytest.fixture(scope="module")
def library_run(tmp_path_factory, g1_assets) -> Path:
    run_dir = tmp_path_factory.mktemp("library") / "run"
    fast = [o for o in FAST if not o.startswith("algo.num_envs=")]
    done = subprocess.run([sys.executable, "-m", "soaklab", "train", *RUN, "--assets-manifest",
                           str(g1_assets.manifest_path), *fast, *QUIET, "algo.num_envs=2",
                           "env.motion=[largebox,crawl_slope]", f"training.log_dir={run_dir}"],
                          env=dict(os.environ, SOAKLAB_TORCH_COMPILE="0"), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return run_dir


def test_a_library_run_logs_each_clip_on_its_own(library_run):
    frame = current_tags(read_scalars(event_file(library_run)))
    tags = set(frame["tag"])
    for clip in ("largebox", "crawl_slope"):
        for measure in ("episodes/terminated", "episodes/truncated", "tracking/body_pos_error_m"):
            assert f"Train/clip/{clip}/{measure}" in tags
    errors = frame[frame["tag"] == "Train/clip/crawl_slope/tracking/body_pos_error_m"]["value"]
    assert len(errors) > 0 and (errors > 0).all()
    diagnostics = json.loads((library_run / "backend_diagnostics.json").read_text())
    assert diagnostics["motion_library"] == {"largebox": {"envs": 1}, "crawl_slope": {"envs": 1}}


def test_evaluation_judges_each_clip_and_one_on_request(cli, tmp_path, library_run):
    out = tmp_path / "evaluation.json"
    result = cli("evaluate", library_run, "--episodes", "2", "--out", out)
    assert result.code == 0, result.err
    clips = json.loads(out.read_text())["clips"]
    assert list(clips) == ["largebox", "crawl_slope"] and all(f["episodes"] == 2 for f in clips.values())
    one = tmp_path / "one.json"
    assert cli("evaluate", library_run, "--episodes", "2", "--clip", "crawl_slope", "--out", one).code == 0
    assert list(json.loads(one.read_text())["clips"]) == ["crawl_slope"]
    bad = tmp_path / "bad.json"
    result = cli("evaluate", library_run, "--clip", "nope", "--out", bad)
    assert result.code == 2 and one_line(result.err) == (
        "soaklab: error: --clip nope: the run tracks largebox, crawl_slope; give one of them")
    assert not bad.exists()
