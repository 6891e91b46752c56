"""Sweep expansion (soaklab.dag.sweeps): names, values and the refusals, on the workflow's own config."""

from __future__ import annotations

import pytest
import yaml

from soaklab.dag.sweeps import MAX_SWEEP_RUNS, SweepError, expand_sweeps
from tests.conftest import REPO

RUNS = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["runs"]


def test_product_of_axes_and_override_sets_in_order():
    sweeps = expand_sweeps({"grid": {
        "base": "cpu",
        "matrix": {"algo": ["sac", "flashsac"], "algo.num_envs": [8, 16], "seed": [1]},
        "override_sets": {"base": {}, "wide": {"algo.critic_hidden": 512}},
    }}, RUNS)
    grid = sweeps["grid"]
    assert len(grid.runs) == 8
    assert grid.run_names[:2] == ["grid-sac-num_envs8-seed1-base", "grid-sac-num_envs8-seed1-wide"]
    assert grid.run_names[-1] == "grid-flashsac-num_envs16-seed1-wide"
    wide = grid.runs[-1].run
    assert wide["algo"] == "flashsac" and wide["task"] == RUNS["cpu"]["task"] and wide["soak"] == RUNS["cpu"]["soak"]
    assert wide["overrides"]["algo.num_envs"] == 16 and wide["overrides"]["algo.critic_hidden"] == 512
    # seed sets both seeds; the base run's other overrides are kept, and the base itself is untouched
    assert wide["overrides"]["env.seed"] == wide["overrides"]["algo.seed"] == 1
    assert wide["overrides"]["algo.max_iterations"] == RUNS["cpu"]["overrides"]["algo.max_iterations"]
    assert "algo.critic_hidden" not in RUNS["cpu"]["overrides"]
    assert grid.plan()["runs"]["grid-sac-num_envs8-seed1-wide"] == {
        "algo": "sac", "algo.num_envs": 8, "seed": 1, "override_set": "wide"}


def test_values_become_safe_name_parts():
    sweeps = expand_sweeps({"s": {"base": "cpu", "matrix": {
        "algo.gamma": [0.99], "training.compile": [True, None], "env.motion": ["a/b c.npz"]}}}, RUNS)
    assert sweeps["s"].run_names == ["s-gamma0.99-compiletrue-motiona_b_c.npz",
                                     "s-gamma0.99-compilenull-motiona_b_c.npz"]


@pytest.mark.parametrize(("sweeps", "words"), [
    ({"s": {"base": "gpu", "matrix": {"algo": ["sac"]}}}, "sweeps.s.base: 'gpu' is not defined under runs:"),
    ({"s": {"base": "cpu", "matrix": {"algo.batch_size": [64]}, "override_sets": {"x": {"algo.batch_size": 8}}}},
     "sweeps.s.override_sets.x.algo.batch_size: also a matrix axis"),
    ({"s": {"base": "cpu", "matrix": {"seed": [1]}, "override_sets": {"x": {"env.seed": 3}}}},
     "sweeps.s.override_sets.x.env.seed: also a matrix axis (seed)"),
    ({"s": {"base": "cpu", "matrix": {"seed": [1], "algo.seed": [2]}}}, "seed sets env.seed and algo.seed"),
    ({"s": {"base": "cpu", "matrix": {"env.motion": ["a b", "a_b"]}}}, "both name run 's-motiona_b'"),
    ({"s": {"base": "cpu", "matrix": {"algo.seed": list(range(MAX_SWEEP_RUNS + 1))}}}, "expands to 1,001 runs"),
    ({"a": {"base": "cpu", "matrix": {"env.motion": ["x-y"]}}, "a-motionx": {"base": "cpu", "matrix": {"task": ["y"]}}},
     "sweeps.a-motionx: run 'a-motionx-y' is also a run of sweeps.a"),
])
def test_refusals_name_the_setting(sweeps, words):
    with pytest.raises(SweepError) as err:
        expand_sweeps(sweeps, RUNS)
    assert words in str(err.value)


def test_a_sweep_run_may_not_shadow_a_defined_run():
    runs = {**RUNS, "s-sac": RUNS["cpu"]}
    with pytest.raises(SweepError, match="run 's-sac' is also defined under runs:"):
        expand_sweeps({"s": {"base": "cpu", "matrix": {"algo": ["sac"]}}}, runs)
