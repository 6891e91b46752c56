"""Every numeric algorithm, env, task and training setting has a meaningful range, checked on the composed
config before anything is spawned: one line, exit 2, naming the setting, the value and the range."""

from __future__ import annotations

import pytest

from soaklab.config.compose import compose
from soaklab.config.keys import INT_MINIMUMS
from soaklab.config.owners import available_algos, available_sims, available_tasks
from soaklab.config.ranges import RANGES, numeric_leaves, range_of
from soaklab.contract.contract import CONTRACT_KEYS
from tests.conftest import REPO, one_line


def _owners():
    for algo in available_algos():
        for task in available_tasks(algo):
            for sim in available_sims(algo, task):
                yield compose(algo, task, sim)


@pytest.mark.parametrize(("override", "words"), [
    ("algo.gamma=1.5", "algo.gamma=1.5 (float): must be in (0, 1]"),
    ("algo.gamma=-5.0", "algo.gamma=-5.0 (float): must be in (0, 1]"),
    ("algo.tau=7.0", "algo.tau=7.0 (float): must be in (0, 1]"),
    ("algo.critic_lr=0.0", "algo.critic_lr=0.0 (float): must be in (0, 1]"),
    ("task.decimation=0", "task.decimation=0: must be an exact int >= 1"),
    ("task.ctrl_dt=-1.0", "task.ctrl_dt=-1.0 (float): must be in (0, inf)"),
    ("task.rewards.body_pos.std=0.0", "task.rewards.body_pos.std=0.0 (float): must be in (0, inf)"),
    ("task.sampler_settings.adaptive_uniform_ratio=1.5", "must be in [0, 1]"),
    ("task.reset_noise.joint_pos=-0.1", "task.reset_noise.joint_pos=-0.1 (float): must be in [0, inf)"),
    ("algo.log_std_min=9.0", "algo.log_std_min=9.0 (float): must be below algo.log_std_max="),
    ("training.max_wall_minutes=0", "training.max_wall_minutes=0: must be in (0, inf)"),
    ("training.max_wall_minutes=-2.5", "training.max_wall_minutes=-2.5 (float): must be in (0, inf)"),
    ("training.max_wall_minutes=nan", "training.max_wall_minutes='nan' (str): must be of type float"),
    ("training.max_wall_minutes=soon", "training.max_wall_minutes='soon' (str): must be of type float"),
    ("training.max_wall_minutes=5 training.dp_ranks=2", "is for one-rank runs for now (this one has 2)"),
])
def test_a_meaningless_setting_is_one_line_and_exit_2(cli, tmp_path, override, words):
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", "--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco",
                 *override.split(), "--out", out)
    assert result.code == 2 and words in one_line(result.err)
    assert not out.exists()


def test_a_replay_smaller_than_one_vector_step_is_refused_naming_the_minimum(cli, tmp_path):
    """The ring takes in algo.num_envs rows a vector step: one row less is refused at resolution
    (the learner's first ingress would fail with a broadcast error), exactly one step resolves."""
    out = tmp_path / "run_config.json"
    run = ("config", "resolve", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco", "algo.num_envs=8")
    for small in (1, 7):
        result = cli(*run, f"algo.replay_buffer_size={small}", "--out", out)
        assert result.code == 2 and f"algo.replay_buffer_size={small}: is smaller than one vector step" in \
            one_line(result.err) and "the minimum is 8" in result.err
        assert not out.exists()
    assert cli(*run, "algo.replay_buffer_size=8", "--out", out).code == 0 and out.is_file()


@pytest.mark.parametrize("override", ["algo.gamma=1.0", "algo.tau=1.0", "task.reset_noise.joint_pos=0.0",
                                      "task.sampler_settings.adaptive_uniform_ratio=0.0",
                                      "task.rewards.action_rate.weight=-1.0"])
def test_the_ends_of_a_range_that_mean_something_are_accepted(override):
    compose("sac", "g1_motion_tracking", "mujoco", [override])


def test_every_numeric_setting_of_every_owner_has_a_range():
    """A new numeric key without a range fails here: the class cannot come back by a new setting."""
    seen = 0
    for composed in _owners():  # the defaults of every owner chain pass their own ranges
        for key, _ in numeric_leaves(composed.config):
            seen += 1
            assert key in CONTRACT_KEYS or key in INT_MINIMUMS or range_of(key) is not None, \
                f"{key} ({composed.algo}/{composed.task}/{composed.sim}) has no range"
    assert seen > 50


def test_every_range_is_in_the_settings_table():
    text = (REPO / "docs" / "settings-contract.md").read_text()
    for pattern, valid in RANGES.items():
        assert f"| `{pattern}` | `{valid.text}` |" in text, pattern
