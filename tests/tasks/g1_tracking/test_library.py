"""env.motion as a list: the envs spread over the clips in blocks, all of them worlds of one model
(each clip's own scene geoms, crawl_slope's terrain only in its worlds), each block with its own
clip, sampler and RNG stream, stepping as one env per clip would; its checkpoint; per-clip metrics
through a real trainer's event file; evaluation per clip; the refusals."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from soaklab.config.compose import compose
from soaklab.contract.layout import block_sizes
from soaklab.contract.sections import RunConfig
from soaklab.metrics.events import current_tags, event_file, read_scalars
from soaklab.rl.checkpoint_structure import check_collector
from soaklab.tasks.env import EnvSpec
from soaklab.tasks.g1_tracking.library import MotionLibraryEnv, WorldSetEnv, build_blocks
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
    record = resolved_config(cli, g1_assets, tmp_path, "env.motion=[largebox,crawl_slope]", "algo.num_envs=8",
                             "env.motion_weights=[1,3]")
    assert record["config"]["env"]["motion_weights"] == [1, 3]
    env = library_env(record)
    try:
        assert env.blocks == (slice(0, 2), slice(2, 8))
        assert env.diagnostics()["motion_library"] == {"largebox": {"envs": 2}, "crawl_slope": {"envs": 6}}
    finally:
        env.close()


def resolved_config(cli, g1_assets, tmp_path, *overrides: str) -> dict:
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", *RUN, "--assets-manifest", g1_assets.manifest_path, "--out", out, *overrides)
    assert result.code == 0, result.err
    return json.loads(out.read_text())


def library_env(record: dict, builder=make_env, sim: str = "mujoco"):
    from soaklab.assets.record import scene_for_env

    run = RunConfig.of(record["config"], record["algo"], record["task"])
    scene = scene_for_env(record["run"]["assets"], record["config"]["env"]["motion"])
    return builder(run, dataclasses.replace(EnvSpec.of(run), sim=sim), scene, compile_terms=False)


def test_the_world_set_steps_each_clip_as_its_own_env_would(cli, g1_assets, tmp_path):
    """One model for every clip's worlds (crawl_slope's terrain absent from largebox's) against one
    env per clip, same seeds, MuJoCo on the CPU: every observation, reward term, tracking error,
    termination, truncation and sampler failure count is the same bit for bit, resets included.
    The summed reward differs in the last float32 bit at most: torch sums the [terms, envs] stack
    in an order that depends on the env count (3 + 2 envs, or 5)."""
    record = resolved_config(cli, g1_assets, tmp_path, "env.motion=[largebox,crawl_slope]", "algo.num_envs=5",
                             "env.num_threads=1")
    world, blocks = library_env(record), library_env(record, build_blocks)
    try:
        assert isinstance(world, WorldSetEnv) and isinstance(blocks, MotionLibraryEnv)
        assert world.labels == ("largebox", "crawl_slope") and world.num_envs == 5
        assert [c.num_frames for c in world.clip_list] == [325, 959]
        for got, want in zip(world.reset(), blocks.reset(), strict=True):
            assert torch.equal(got, want)
        generator, ended = torch.Generator().manual_seed(4), 0
        for _ in range(12):
            actions = (torch.rand(5, 29, generator=generator) * 2 - 1) * 2  # large: episodes end in here
            got, want = world.step(actions), blocks.step(actions)
            for name in ("obs", "critic_obs", "terminated", "truncated", "final_obs", "final_critic_obs"):
                assert torch.equal(getattr(got, name), getattr(want, name)), name
            for table in ("reward_terms", "metrics"):
                for key, value in getattr(want, table).items():
                    assert torch.equal(getattr(got, table)[key], value), key
            assert (got.reward - want.reward).abs().max() <= 1e-6
            assert got.clips == want.clips == (("largebox", slice(0, 3)), ("crawl_slope", slice(3, 5)))
            ended += int(got.done.sum())
        assert ended > 0, "the window must include resets"
        for sampler, env in zip(world.samplers, blocks.envs, strict=True):
            assert torch.equal(sampler.failures, env.sampler.failures)
        values = step_metrics(got)
        assert values["clip/largebox/tracking/body_pos_error_m"].shape == (3,)
        assert torch.equal(values["clip/crawl_slope/tracking/body_pos_error_m"],
                           values["tracking/body_pos_error_m"][3:])
        assert world.diagnostics()["motion_library"] == {"largebox": {"envs": 3}, "crawl_slope": {"envs": 2}}
    finally:
        world.close()
        blocks.close()


@pytest.mark.parametrize("sim", [
    "mujoco",
    pytest.param("mjwarp", marks=pytest.mark.skipif(importlib.util.find_spec("mujoco_warp") is None,
                                                    reason="mujoco_warp is not installed (the warp extra)")),
])
def test_a_world_set_checkpoint_continues_bit_for_bit_and_an_old_one_is_refused(cli, g1_assets, tmp_path, sim):
    """A new world set given a saved one's state steps on exactly as the saved one did, each clip's
    resets and sampler included: on MuJoCo by ids, on MJWarp (warp's CPU device without a GPU) by
    mask, each clip drawing its starts from its own stream. A checkpoint of one env per clip is refused."""
    record = resolved_config(cli, g1_assets, tmp_path, "env.motion=[largebox,crawl_slope]", "algo.num_envs=3",
                             "env.num_threads=1")
    first, second = library_env(record, sim=sim), library_env(record, sim=sim)
    try:
        first.reset()
        generator = torch.Generator().manual_seed(5)
        actions = [(torch.rand(3, 29, generator=generator) * 2 - 1) * 2 for _ in range(14)]
        for a in actions[:6]:
            first.step(a)
        state = first.state_dict()
        spaces = first.spaces
        old = {"step": 0, "envs": [{"blocks": [state]}], "published": [(
            torch.zeros(3, spaces.actor_obs), torch.zeros(3, spaces.critic_obs), torch.zeros(3))],
            "term_sums": torch.zeros(9, dtype=torch.float64), "term_count": 0, "torch_rng": torch.get_rng_state()}
        expected = SimpleNamespace(groups=(3,), obs_dim=spaces.actor_obs, critic_dim=spaces.critic_obs, terms=9)
        with pytest.raises(ValueError, match="one env per clip, saved before the library became one world set"):
            check_collector(old, 0, expected)
        with pytest.raises(ValueError, match="one env per clip"):
            second.load_state_dict({"blocks": [state]})
        second.load_state_dict(state)
        ended = 0
        for a in actions[6:]:
            got, want = second.step(a), first.step(a)
            assert torch.equal(got.obs, want.obs) and torch.equal(got.reward, want.reward)
            assert torch.equal(got.done, want.done)
            ended += int(want.done.sum())
        assert ended > 0, "the continuation must include resets"
        for a, b in zip(second.samplers, first.samplers, strict=True):
            assert torch.equal(a.failures, b.failures)
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("sim", [
    "mujoco",
    pytest.param("mjwarp", marks=pytest.mark.skipif(importlib.util.find_spec("mujoco_warp") is None,
                                                    reason="mujoco_warp is not installed (the warp extra)")),
])
def test_a_world_never_touches_another_clips_terrain(g1_assets, sim):
    """Two worlds of the union scene, one with crawl_slope's terrain and one without, each robot
    dropped over the terrain's platform: only the first lands on it (contacts with its geoms, the
    pelvis held up), the second falls through to the floor; and so again after a reset. On MJWarp
    without a GPU this runs on warp's CPU device."""
    from soaklab.assets.scene import union_scene
    from soaklab.sim import build_stepper
    from soaklab.tasks.g1_tracking.env import TrackingConfig, build_tracking_model

    scenes = [g1_assets.scene, g1_assets.scene.parent / "scene_crawl_slope.xml"]
    spec, own = union_scene(scenes)
    cfg = TrackingConfig.from_config(compose("sac", "g1_motion_tracking", "mujoco", []).config["task"])
    model, _, _ = build_tracking_model(spec, cfg)
    terrain = [g for g in range(model.ngeom) if model.geom(g).name.startswith("terrain_crawl_slope")]
    assert len(terrain) == 2 and all(model.geom(g).name in own[1] and model.geom(g).name not in own[0]
                                     for g in terrain)
    absent = np.zeros((2, model.ngeom), dtype=bool)
    absent[1, terrain] = True  # world 0: crawl_slope's; world 1: largebox's
    backend = build_stepper(sim, model, 2, cfg.decimation, device="cpu", num_threads=1, absent_geoms=absent)
    try:
        qpos = np.tile(model.key("home").qpos, (2, 1))
        qpos[:, :3] = [0.0, 1.5, 0.41 + 0.8]  # over the platform (its top at 0.41 m, y in 0.72..2.29)
        for _ in range(2):  # a fresh state, then a reset of both worlds
            backend.reset(np.arange(2), qpos, np.zeros((2, model.nv)))
            touched: list[set[int]] = [set(), set()]
            for _ in range(40):
                backend.step()
                for w, geoms in enumerate(terrain_contacts(backend, sim, set(terrain))):
                    touched[w] |= geoms
            pelvis = backend.state[:, 2].clone()
            assert touched[0] and not touched[1], touched
            assert pelvis[0] > pelvis[1] + 0.3, pelvis  # on the platform, against on the floor
    finally:
        backend.close()


def terrain_contacts(backend, sim: str, terrain: set[int]) -> list[set[int]]:
    """Each world's terrain geoms in contact now."""
    if sim == "mujoco":
        return [{int(g) for g in d.contact.geom[:d.ncon].ravel()} & terrain for d in backend.datas]
    count = int(backend.d.nacon.numpy()[0])
    geoms, worlds = backend.d.contact.geom.numpy()[:count], backend.d.contact.worldid.numpy()[:count]
    return [{int(g) for g in geoms[worlds == w].ravel()} & terrain for w in range(backend.num_envs)]


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
