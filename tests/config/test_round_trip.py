"""Run records round-trip: every legal value of every setting, however it is written as an override
(typed, Python's str or repr, JSON as the DAG writes it, a Snakemake config read as YAML 1.1), reads
back from run_config.json as the same type and value. A property test (Hypothesis) over the contract's
keys, the algorithm, env and task ranges and their owner defaults (docs/settings-contract.md)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soaklab.config.compose import compose, leaf_keys
from soaklab.config.keys import CHOICES, INT_MAXIMUMS, INT_MINIMUMS
from soaklab.config.overrides import parse_overrides
from soaklab.config.ranges import ORDERED, Range, range_of
from soaklab.config.yaml11 import as_float_if_exponent
from soaklab.contract.contract import EXACT_INT_ALGO_KEYS, KNOBS_BY_KEY, resolve_runtime_settings
from soaklab.contract.sections import RunConfig

OWNERS = [("flashsac", "g1_motion_tracking", "mujoco"), ("sac", "cartpole_swingup", "mujoco")]
INT_CEILING = 2**31  # exact ints without a maximum: any size JSON and YAML write as digits
PROFILE = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow])


def floats_in(valid: Range) -> st.SearchStrategy[float]:
    low = None if valid.low == -math.inf else valid.low
    high = None if valid.high == math.inf else valid.high
    return st.floats(min_value=low, max_value=high, exclude_min=low is not None and valid.low_open,
                     exclude_max=high is not None and valid.high_open, allow_nan=False, allow_infinity=False)


def value_strategy(key: str, default: Any, config: dict[str, Any]) -> st.SearchStrategy[Any] | None:
    """The legal values of one setting, or None for a setting this test does not draw (strings,
    lists, and the keys fixed by the owner)."""
    if key in CHOICES:
        return st.sampled_from(CHOICES[key])
    if key in KNOBS_BY_KEY:
        knob = KNOBS_BY_KEY[key]
        values = st.integers(knob.minimum, knob.bound(config["algo"]["num_envs"]))
        return st.one_of(st.none(), values) if knob.nullable else values
    if key in EXACT_INT_ALGO_KEYS:
        return st.integers(1, 1 << 16)
    if key == "training.cuda_process_sharing":
        return st.sampled_from([None, "mps"])
    if key in INT_MINIMUMS:
        return st.integers(INT_MINIMUMS[key], INT_MAXIMUMS.get(key, INT_CEILING))
    if isinstance(default, bool) or not isinstance(default, int | float):
        return st.booleans() if isinstance(default, bool) else None
    valid = range_of(key)
    if isinstance(default, int):
        return st.integers(-INT_CEILING, INT_CEILING) if valid is None else None
    for low, high in ORDERED:  # a bound of a pair stays on its side of the other's default
        if key == low:
            return floats_in(Range(high=_get(config, high)))
        if key == high:
            return floats_in(Range(low=_get(config, low)))
    return floats_in(valid or Range())


def _get(config: dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    return node


def settings_of(owner: tuple[str, str, str]) -> list[tuple[str, st.SearchStrategy[Any]]]:
    config = compose(*owner).config
    drawn = [(key, value_strategy(key, _get(config, key), config)) for key in leaf_keys(config)
             if key.split(".")[0] in ("algo", "env", "task", "training")]
    return [(key, strategy) for key, strategy in drawn if strategy is not None]


SETTINGS = {owner: settings_of(owner) for owner in OWNERS}

# How a value reaches an override: typed by a person (Python's str and repr are what they copy), as
# JSON (the DAG's run_args), or from a Snakemake config file or --config, which PyYAML reads as YAML 1.1.
WRITTEN = {"str": str, "repr": repr, "json": json.dumps}


def written(value: Any, how: str) -> str:
    if how == "yaml 1.1":  # a config file as typed, read by Snakemake; then run_args writes it as JSON
        read = yaml.safe_load(f"v: {'null' if value is None else value}")["v"]
        return json.dumps(as_float_if_exponent(read))
    return "null" if value is None else WRITTEN[how](value)


def test_every_owner_has_settings_of_each_kind_to_draw():
    for owner, drawn in SETTINGS.items():
        keys = {key for key, _ in drawn}
        assert {"algo.num_envs", "training.inference_slot_capacity", "training.cuda_process_sharing",
                "algo.gamma", "algo.critic_lr", "env.seed", "task.ctrl_dt"} <= keys, owner
        assert len(keys) >= 30, owner


@pytest.mark.parametrize("owner", OWNERS, ids=lambda o: "/".join(o))
@PROFILE
@given(data=st.data())
def test_a_legal_value_reads_back_from_the_run_record_as_itself(owner, data):
    key, strategy = data.draw(st.sampled_from(SETTINGS[owner]), label="setting")
    value = data.draw(strategy, label="value")
    how = data.draw(st.sampled_from([*WRITTEN, "yaml 1.1"]), label="written as")
    text = f"{key}={written(value, how)}"
    [override] = parse_overrides([text])
    assert type(override.value) is type(value) and override.value == value, text
    composed = compose(*owner, [text])
    record = json.loads(json.dumps({"config": composed.config,
                                    "overrides": {o.key: o.value for o in composed.overrides}}))
    back = _get(record["config"], key)
    assert type(back) is type(value) and back == value, (text, back)
    assert RunConfig.of(record["config"], *owner[:2]) == RunConfig.of(composed.config, *owner[:2])
    resolve_runtime_settings(record["config"])  # the contract takes what it reads back
    # `train --run-config` and the DAG write the recorded overrides again as JSON: the same value
    [again] = parse_overrides([f"{k}={json.dumps(v)}" for k, v in record["overrides"].items()])
    assert type(again.value) is type(value) and again.value == value, text
