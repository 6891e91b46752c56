"""The typed run configuration: every owner's composed config, read once into frozen sections."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from soaklab.config.compose import available_algos, available_sims, compose
from soaklab.contract.sections import AlgoConfig, FlashSACConfig, RunConfig, algo_config, section

OWNERS = [(algo, task, sim) for algo in available_algos() for task in ("g1_motion_tracking", "cartpole_swingup")
          for sim in available_sims(algo, task)]


@pytest.mark.parametrize(("algo", "task", "sim"), OWNERS)
def test_every_owner_reads_into_its_sections_and_back(algo, task, sim):
    composed = compose(algo, task, sim)
    run = composed.run
    assert run.as_dict() == composed.config, "nothing lost or renamed"
    assert type(run.algo) is (FlashSACConfig if algo == "flashsac" else AlgoConfig)
    assert pickle.loads(pickle.dumps(run)) == run, "it travels to a spawned collector whole"


def test_values_take_their_field_types_and_lists_freeze():
    composed = compose("flashsac", "g1_motion_tracking", "mujoco",
                       ["algo.gamma=1", "env.motion=[largebox,crawl_slope]", "training.dp_collector_cpu_ids=[[0],[1]]"])
    run = composed.run
    assert run.algo.gamma == 1.0 and isinstance(run.algo.gamma, float)
    assert run.env.motion == ("largebox", "crawl_slope")
    assert run.training.dp_collector_cpu_ids == ((0,), (1,))
    assert run.as_dict()["env"]["motion"] == ["largebox", "crawl_slope"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.algo.gamma = 0.5  # type: ignore[misc]
    derived = dataclasses.replace(run, algo=dataclasses.replace(run.algo, num_envs=3))
    assert derived.algo.num_envs == 3 and run.algo.num_envs == composed.config["algo"]["num_envs"]


def test_a_section_takes_exactly_its_fields():
    algo = compose("sac", "cartpole_swingup", "mujoco").config["algo"]
    with pytest.raises(ValueError, match=r"missing \['gamma'\], unknown \[\]"):
        section(AlgoConfig, {k: v for k, v in algo.items() if k != "gamma"}, "algo")
    with pytest.raises(ValueError, match=r"unknown \['gama'\]"):
        section(AlgoConfig, {**algo, "gama": 0.9}, "algo")
    with pytest.raises(ValueError, match="unknown algo 'ppo'"):
        algo_config("ppo", algo)
    with pytest.raises(ValueError, match="missing"):  # sac's section lacks FlashSAC's own keys
        RunConfig.of(compose("sac", "cartpole_swingup", "mujoco").config, "flashsac", "cartpole_swingup")
