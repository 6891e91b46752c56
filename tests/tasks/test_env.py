"""The env spec (count, seed, backend, device) make_env builds from: one holder of the env count, each
group's spec derived from it, and the spec, not the run, deciding what is built."""

from __future__ import annotations

from dataclasses import replace

import pytest

from soaklab.config.compose import compose
from soaklab.contract.contract import MAX_SEED
from soaklab.errors import SettingError
from soaklab.tasks.env import EnvSpec
from soaklab.tasks.registry import make_env
from soaklab.tasks.rng import ManagerRng


def test_derived_group_seeds_stay_valid_at_the_top_of_the_range():
    run = compose("sac", "cartpole_swingup", "mujoco", ["algo.num_envs=8"]).run
    run = replace(run, env=replace(run.env, seed=MAX_SEED))
    spec = EnvSpec.of(run)
    assert spec == EnvSpec(8, MAX_SEED, "mujoco", "cpu")
    groups = [spec.group(4, g) for g in range(3)]
    assert {g.num_envs for g in groups} == {4} and spec.num_envs == 8, "derived, the spec unchanged"
    assert [g.seed for g in groups] == [MAX_SEED, 0, 1]
    for g in groups:
        ManagerRng(g.seed)


def test_the_spec_not_the_run_decides_the_count_and_the_seed():
    run = compose("sac", "cartpole_swingup", "mujoco", ["algo.num_envs=8", "env.seed=3"]).run
    a = make_env(run, EnvSpec(3, 11, "mujoco"))
    b = make_env(run, EnvSpec(3, 11, "mujoco"))
    c = make_env(run, EnvSpec(3, 12, "mujoco"))
    try:
        assert a.num_envs == 3 and run.algo.num_envs == 8
        first = [env.reset()[0] for env in (a, b, c)]
        assert first[0].shape[0] == 3
        assert (first[0] == first[1]).all() and not (first[0] == first[2]).all(), "the spec's seed draws the starts"
    finally:
        for env in (a, b, c):
            env.close()


def test_a_backend_the_task_does_not_step_is_named():
    run = compose("sac", "cartpole_swingup", "mujoco", []).run
    with pytest.raises(SettingError, match="training.sim_backend") as info:
        make_env(run, EnvSpec(2, 1, "mjwarp"))
    assert "mjwarp" in str(info.value) and "\n" not in str(info.value)
