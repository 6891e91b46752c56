"""All seven removed keys (and the bare manager_torch_device) fail closed with their migration."""

from __future__ import annotations

import pytest

from soaklab.contract.removed import REMOVED_KEYS
from tests.conftest import CPU_HOST, one_line

REPLACEMENTS = {
    "training.sim_carrier_device": "training.collector_tensor_device",
    "training.inference_transport": "training.collector_tensor_device",
    "env.sim_carrier_device": "env.collector_tensor_device",
    "env.manager_torch_device": "env.collector_tensor_device",
    "manager_torch_device": "env.collector_tensor_device",
    "env.tensor_runtime_device": "training.device",
    "env.tensor_runtime": "tensor-native",
    "training.devices": "CUDA_VISIBLE_DEVICES",
}


def test_every_removed_key_has_a_replacement():
    assert set(REMOVED_KEYS) == set(REPLACEMENTS)


@pytest.mark.parametrize("key", sorted(REPLACEMENTS))
def test_removed_key_override_fails_closed(cli, tmp_path, key):
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", "--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco",
                 f"{key}=cpu", "--out", out, host=CPU_HOST)
    assert result.code == 2
    line = one_line(result.err)
    assert f"{key}: this key was removed" in line
    assert REPLACEMENTS[key] in line
    assert not out.exists()
