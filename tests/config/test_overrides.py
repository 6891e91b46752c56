"""KEY=VALUE overrides: raw YAML values are checked before merging, never coerced."""

from __future__ import annotations

import json

import pytest

from soaklab.config.compose import compose
from soaklab.errors import InvalidInput, SettingError
from tests.conftest import CPU_HOST, one_line

RUN = ("--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco")


def test_values_keep_their_yaml_types():
    cfg = compose("sac", "g1_motion_tracking", "mujoco",
                  ["algo.gamma=0.95", "env.sampler=uniform", "algo.num_envs=4", "training.log_dir=runs/x"]).config
    assert cfg["algo"]["gamma"] == 0.95 and cfg["env"]["sampler"] == "uniform"
    assert cfg["algo"]["num_envs"] == 4 and cfg["training"]["log_dir"] == "runs/x"


def test_int_is_accepted_for_a_float_key():
    assert compose("sac", "g1_motion_tracking", "mujoco", ["algo.gamma=1"]).config["algo"]["gamma"] == 1


@pytest.mark.parametrize(("override", "key", "words"), [
    ("algo.gamma='0.9'", "algo.gamma", "must be of type float"),
    ("algo.max_iterations=0", "algo.max_iterations", "exact int >= 1"),
    ("algo.max_iterations=10.0", "algo.max_iterations", "must be of type int"),
    ("algo.use_amp=1", "algo.use_amp", "unknown configuration key"),
    ("env.sampler=random", "env.sampler", "uniform, adaptive"),
    ("env.num_threads=0", "env.num_threads", "exact int >= 1"),
    ("env.motion=3", "env.motion", "must be of type str"),
    ("task.rewards=1", "task.rewards", "is a mapping"),
    ("algo.seed=null", "algo.seed", "null is not allowed"),
    ("training.sim_backend=mjwarp", "training.sim_backend", "--sim owner"),
    ("env.collector_tensor_device=cuda", "env.collector_tensor_device", "training.collector_tensor_device"),
    # The GPU throughput levers (docs/runtime.md#gpu-throughput); `off` would be YAML's false.
    ("algo.compile=off", "algo.compile", "eager, nets, update, auto"),
    ("algo.compile=fast", "algo.compile", "eager, nets, update, auto"),
    ("training.collector_stream_priority=1", "training.collector_stream_priority", "default, high"),
    ("training.mps_learner_thread_percentage=0", "training.mps_learner_thread_percentage", "1..100"),
    ("training.mps_collector_thread_percentage=101", "training.mps_collector_thread_percentage", "1..100"),
    ("training.mps_learner_thread_percentage=50.0", "training.mps_learner_thread_percentage", "type int"),
])
def test_bad_override_fails_closed(override, key, words):
    with pytest.raises((SettingError, InvalidInput)) as info:
        compose("sac", "g1_motion_tracking", "mujoco", [override])
    assert key in str(info.value) and words in str(info.value)


@pytest.mark.parametrize(("override", "words"), [
    ("algo.num_env=4", "did you mean algo.num_envs"),
    ("training.inference_slots=2", "did you mean training.inference_slot_capacity"),
    ("nonsense=1", "unknown configuration key"),
    ("algo.num_envs", "expected KEY=VALUE"),
    ("algo.num_envs=[1", "not valid YAML"),
])
def test_unknown_or_malformed_override_via_cli(cli, tmp_path, override, words):
    out = tmp_path / "rc.json"
    result = cli("config", "resolve", *RUN, override, "--out", out, host=CPU_HOST)
    assert result.code == 2
    line = one_line(result.err)
    assert words in line and override.split("=")[0] in line
    assert not out.exists()


def test_duplicate_override_is_refused():
    with pytest.raises(InvalidInput, match="given more than once"):
        compose("sac", "g1_motion_tracking", "mujoco", ["algo.num_envs=4", "algo.num_envs=8"])


def test_run_config_records_overrides_and_hash(cli, tmp_path):
    out = tmp_path / "rc.json"
    result = cli("config", "resolve", *RUN, "algo.num_envs=4", "algo.replay_buffer_size=100", "--out", out,
                 host=CPU_HOST)
    assert result.code == 0, result.err
    record = json.loads(out.read_text())
    assert record["overrides"] == {"algo.num_envs": 4, "algo.replay_buffer_size": 100}
    assert record["config_hash"].startswith("sha256:")
    again = tmp_path / "rc2.json"
    cli("config", "resolve", *RUN, "algo.num_envs=4", "algo.replay_buffer_size=100", "--out", again, host=CPU_HOST)
    assert json.loads(again.read_text())["config_hash"] == record["config_hash"]


@pytest.mark.parametrize("override", ["training.mps_learner_thread_percentage=50",
                                      "training.mps_collector_thread_percentage=80"])
def test_an_mps_thread_share_without_mps_is_refused_before_anything_is_written(cli, tmp_path, override):
    out = tmp_path / "rc.json"
    result = cli("config", "resolve", *RUN, override, "--out", out, host=CPU_HOST)
    assert result.code == 2
    assert one_line(result.err) == (f"soaklab: error: {override}: limits an MPS client; it needs "
                                    "training.cuda_process_sharing=mps")
    assert not out.exists()


@pytest.mark.parametrize("value", [1e-05, 3e-08, 2.5e-07, 0.5, 1.0, 1e+20])
def test_a_float_round_trips_however_it_is_written(cli, tmp_path, value):
    """Python and JSON write small floats with an exponent and no dot (1e-05), which PyYAML reads as a
    string: every way a value reaches an override (typed, JSON as the DAG writes it, Python's str)
    reads back as the same float, and so does the run config written from it."""
    from soaklab.config.overrides import parse_overrides

    for text in (repr(value), json.dumps(value), str(value), f"{value:E}"):
        parsed = parse_overrides([f"algo.critic_lr={text}"])[0].value
        assert isinstance(parsed, float) and parsed == value, text
    assert parse_overrides(["env.motion='1e-05'"])[0].value == "1e-05"  # quoted: the string it says
    if value <= 1.0:  # a learning rate's range
        out = tmp_path / "run_config.json"
        assert cli("config", "resolve", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco",
                   f"algo.critic_lr={json.dumps(value)}", "--out", out).code == 0
        record = json.loads(out.read_text())
        again = parse_overrides([f"{k}={json.dumps(v)}" for k, v in record["overrides"].items()])
        assert [(o.key, o.value) for o in again] == [("algo.critic_lr", value)]
        assert type(record["config"]["algo"]["critic_lr"]) is float and record["config"]["algo"]["critic_lr"] == value
