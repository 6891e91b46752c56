"""`obtain`: the one way the CLI's `train` and the soak monitor come by a run (resolve an owner,
load a record as it stands, or resolve a record again when something changes it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soaklab.config.host import probe_host
from soaklab.config.resolve import Pin, RunSource, obtain
from soaklab.errors import InvalidInput

OWNER = {"algo": "sac", "task": "cartpole_swingup", "sim": "mujoco"}


@pytest.fixture
def record(cli, tmp_path: Path) -> Path:
    path = tmp_path / "run_config.json"
    result = cli("config", "resolve", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco",
                 "algo.num_envs=8", "algo.max_iterations=20", "--out", path)
    assert result.code == 0, result.err
    return path


def test_a_record_alone_is_loaded_as_it_stands_and_its_pins_are_checked(record, tmp_path):
    host = probe_host(cuda_context=False)
    loaded = obtain(RunSource(record, pins=(Pin("--num-envs", "algo.num_envs", 8),), log_dir=tmp_path / "run"), host)
    assert loaded.origin.startswith(f"loaded from {record}")
    assert loaded.composed.get("training.log_dir") == str(tmp_path / "run")
    assert loaded.composed.get("algo.max_iterations") == 20
    with pytest.raises(InvalidInput, match=r"--iterations=5: disagrees with algo.max_iterations=20 in .*; drop"):
        obtain(RunSource(record, pins=(Pin("--iterations", "algo.max_iterations", 5),)), host)


def test_a_record_with_overrides_is_resolved_again_with_them_and_its_pins(record, tmp_path):
    host = probe_host(cuda_context=False)
    source = RunSource(record, overrides=("algo.gamma=0.9",), pins=(Pin("--iterations", "algo.max_iterations", 7),),
                       log_dir=tmp_path / "null")
    again = obtain(source, host)
    assert again.origin.startswith("resolved on this host")
    assert again.composed.get("algo.gamma") == 0.9 and again.composed.get("algo.max_iterations") == 7
    assert again.composed.get("algo.num_envs") == 8  # the record's own overrides still hold
    assert again.composed.get("training.log_dir") == str(tmp_path / "null")  # a path, never YAML's null
    assert json.loads(record.read_text())["config"]["algo"]["gamma"] != 0.9, "the record is not changed"


def test_an_owner_is_resolved_with_its_overrides(tmp_path):
    resolved = obtain(RunSource(**OWNER, overrides=("algo.num_envs=4",), log_dir=tmp_path / "r"),
                      probe_host(cuda_context=False))
    assert resolved.composed.get("algo.num_envs") == 4
    assert resolved.composed.get("training.log_dir") == str(tmp_path / "r")


@pytest.mark.parametrize(("source", "words"), [
    (RunSource(algo="sac", task="cartpole_swingup"), "--algo, --task and --sim must be given together"),
    (RunSource(Path("x.json"), algo="sac"), "--run-config: takes algo/task/sim from the file"),
])
def test_a_half_given_source_is_refused_in_one_line(source, words):
    with pytest.raises(InvalidInput, match=words):
        obtain(source, probe_host(cuda_context=False))


def test_a_record_whose_derived_fields_this_code_would_not_derive_is_refused(record):
    """The hash and the overrides agree (derived fields are not composed), but resolving the record's
    request again on this host gives another config: the record is refused, not silently replaced."""
    from soaklab.config.resolve import load
    from soaklab.config.run_config import config_hash

    doc = json.loads(record.read_text())
    assert doc["config"]["env"]["collector_tensor_device"] == "cpu"
    doc["config"]["env"]["collector_tensor_device"] = "cuda"
    doc["config_hash"] = config_hash(doc["config"])
    record.write_text(json.dumps(doc))
    with pytest.raises(InvalidInput, match="resolves its request to another config than it records"):
        load(record, probe_host(cuda_context=False))
