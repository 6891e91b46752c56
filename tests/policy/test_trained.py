"""A finished run read back: a record this build cannot read whole is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soaklab.config.compose import compose
from soaklab.errors import InvalidInput
from soaklab.policy.trained import run_of


def test_a_record_missing_a_key_this_build_reads_is_one_line(tmp_path: Path):
    config = json.loads(json.dumps(compose("sac", "cartpole_swingup", "mujoco").config))
    record = {"algo": "sac", "task": "cartpole_swingup", "config": config}
    assert run_of(tmp_path, record).algo.gamma == config["algo"]["gamma"]
    del config["algo"]["compile"]  # as a run resolved before algo.compile existed would record it
    with pytest.raises(InvalidInput) as info:
        run_of(tmp_path, record)
    line = str(info.value)
    assert "\n" not in line and "run_config.json: its config does not fit this soaklab" in line
    assert "compile" in line
