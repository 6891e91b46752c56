"""The knob table with every bad kind, through the real `soaklab config resolve`."""

from __future__ import annotations

import dataclasses
import json

import pytest

from soaklab.contract.contract import KNOBS, check_exact_int, resolve_runtime_settings
from soaklab.errors import SettingError
from tests.conftest import CPU_HOST, one_line

RUN = ("--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco")
NUM_ENVS = 16

# Each bad kind the contract names, as the YAML text a user would type.
BAD_KINDS = {
    "bool": "true",
    "string": "'2'",
    "float": "2.5",
    "float_one": "1.0",
    "zero": "0",
    "negative": "-3",
    "null": "null",
}
MAXIMA = {k.key: (k.maximum if k.maximum is not None else NUM_ENVS) for k in KNOBS}


def resolve(cli, tmp_path, *overrides: str, host: str = CPU_HOST):
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", *RUN, f"algo.num_envs={NUM_ENVS}", "algo.replay_buffer_size=1000",
                 *overrides, "--out", out, host=host)
    return result, out


def assert_refused(result, out, key: str) -> str:
    assert result.code == 2
    line = one_line(result.err)
    assert key in line
    assert not out.exists(), "a refused resolution must write nothing"
    return line


# null is the documented default of replay_ingress_slot_rows (= algo.num_envs), so not a bad kind there.
KNOB_BAD_KINDS = [
    (k.key, kind) for k in KNOBS for kind in sorted(BAD_KINDS) if not (kind == "null" and k.nullable)
]


@pytest.mark.parametrize(("key", "kind"), KNOB_BAD_KINDS)
def test_knob_rejects_bad_kind(cli, tmp_path, key, kind):
    text = BAD_KINDS[kind]
    result, out = resolve(cli, tmp_path, f"{key}={text}")
    line = assert_refused(result, out, key)
    assert "exact int" in line


@pytest.mark.parametrize("key", [k.key for k in KNOBS])
def test_knob_rejects_above_maximum(cli, tmp_path, key):
    result, out = resolve(cli, tmp_path, f"{key}={MAXIMA[key] + 1}")
    line = assert_refused(result, out, key)
    assert str(MAXIMA[key]) in line


@pytest.mark.parametrize("key", [k.key for k in KNOBS])
def test_knob_accepts_its_bounds(cli, tmp_path, key):
    for value in (1, MAXIMA[key]):
        result, out = resolve(cli, tmp_path, f"{key}={value}")
        assert result.code == 0, result.err
        limits = json.loads(out.read_text())["run"]["runtime_limits"][key]
        assert limits["configured"] == value and limits["effective"] == value
        assert limits["maximum"] == MAXIMA[key]


@pytest.mark.parametrize("key", ["algo.batch_size", "algo.updates_per_step", "algo.num_envs"])
@pytest.mark.parametrize("kind", sorted(BAD_KINDS))
def test_learner_shape_keys_follow_the_exact_int_rule(cli, tmp_path, key, kind):
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", *RUN, f"{key}={BAD_KINDS[kind]}", "--out", out, host=CPU_HOST)
    assert_refused(result, out, key)


@pytest.mark.parametrize("text", ["true", "'MPS'", "cuda", "1", "1.0", "0", "-1", "'mps '"])
def test_cuda_process_sharing_accepts_only_null_or_mps(cli, tmp_path, text):
    result, out = resolve(cli, tmp_path, f"training.cuda_process_sharing={text}")
    line = assert_refused(result, out, "training.cuda_process_sharing")
    assert "null or the string 'mps'" in line


def test_mps_on_a_host_bridge_run_is_refused(cli, tmp_path):
    result, out = resolve(cli, tmp_path, "training.cuda_process_sharing=mps")
    line = assert_refused(result, out, "training.cuda_process_sharing")
    assert "sim=mjwarp" in line


def test_slot_rows_null_resolves_to_num_envs(cli, tmp_path):
    result, out = resolve(cli, tmp_path)
    assert result.code == 0, result.err
    limits = json.loads(out.read_text())["run"]["runtime_limits"]
    assert limits["training.replay_ingress_slot_rows"] == {
        "configured": None, "default": None, "effective": NUM_ENVS, "maximum": NUM_ENVS,
    }
    assert limits["training.inference_slot_capacity"] == {"configured": 1, "default": 1, "effective": 1, "maximum": 16}
    assert limits["training.collector_metrics_interval"]["maximum"] == 10000


def test_slot_rows_bound_follows_num_envs_override(cli, tmp_path):
    # slot rows 20 is valid once num_envs is 32, in the same command line
    out = tmp_path / "rc.json"
    ok = cli("config", "resolve", *RUN, "algo.num_envs=32", "algo.replay_buffer_size=1000",
             "training.replay_ingress_slot_rows=20", "--out", out, host=CPU_HOST)
    assert ok.code == 0, ok.err
    settings = json.loads(out.read_text())["run"]["runtime_limits"]["training.replay_ingress_slot_rows"]
    assert settings["effective"] == 20 and settings["maximum"] == 32


def test_runtime_settings_are_frozen_and_derive_rows_per_sync():
    config = {
        "algo": {"num_envs": 10, "batch_size": 64, "updates_per_step": 3},
        "training": {"inference_slot_capacity": 2, "collector_metrics_interval": 1, "replay_ingress_depth": 2,
                     "replay_ingress_slot_rows": 4, "cuda_process_sharing": None},
    }
    settings = resolve_runtime_settings(config)
    assert settings.learner_rows_per_sync == 192
    # The effective values are the limits' own: a null slot_rows is algo.num_envs.
    assert (settings.inference_slot_capacity, settings.replay_ingress_depth, settings.replay_ingress_slot_rows,
            settings.collector_metrics_interval) == (2, 2, 4, 1)
    assert resolve_runtime_settings({**config, "training": {**config["training"], "replay_ingress_slot_rows": None}}
                                    ).replay_ingress_slot_rows == 10
    # One holder per value: what the config states is the run config's, never repeated here.
    assert [f.name for f in dataclasses.fields(settings)] == ["limits"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.limits = {}  # type: ignore[misc]


def test_check_exact_int_names_key_and_value():
    with pytest.raises(SettingError) as info:
        check_exact_int("algo.batch_size", True)
    assert str(info.value).startswith("algo.batch_size=true (bool)")
