"""Every cell of the carrier table, on a simulated CUDA host and on a CPU host."""

from __future__ import annotations

import json

import pytest

from soaklab.contract.devices import HostCapabilities, resolve_devices
from soaklab.errors import SettingError
from tests.conftest import CPU_HOST, CUDA_HOST, one_line

CUDA = HostCapabilities(cuda_device_count=2, cuda_free_bytes=(80 << 30, 80 << 30), current_cuda_device=0)
CPU = HostCapabilities()
APPLE = HostCapabilities(apple_mps=True)

# (host, learner, sim, carrier request) -> resolved carrier, ignored
RESOLVED = [
    (CUDA, "cuda", "mujoco", "auto", "cuda:0", False),
    (CUDA, "cuda:1", "mujoco", "auto", "cuda:1", False),
    (CUDA, "cuda", "mujoco", "cuda", "cuda:0", False),
    (CUDA, "cpu", "mujoco", "auto", "cpu", False),
    (CUDA, "cpu", "mujoco", "cpu", "cpu", False),
    (CUDA, "cpu", "mujoco", "cuda", "cuda:0", False),
    (CUDA, "cuda", "mjwarp", "auto", "cuda:0", True),
    (CUDA, "cuda:1", "mjwarp", "cpu", "cuda:1", True),
    (CPU, "cpu", "mujoco", "auto", "cpu", False),
    (CPU, "cpu", "mujoco", "cpu", "cpu", False),
    (APPLE, "mps", "mujoco", "auto", "cpu", False),
    (APPLE, "mps", "mujoco", "cpu", "cpu", False),
]


@pytest.mark.parametrize(("host", "learner", "sim", "carrier", "expected", "ignored"), RESOLVED)
def test_carrier_table_resolves(host, learner, sim, carrier, expected, ignored):
    devices = resolve_devices(learner, carrier, sim, None, host)
    assert devices.carrier == expected
    assert devices.carrier_ignored is ignored
    assert devices.inference_transport == ("host_ring" if expected == "cpu" else "cuda_ring")


# (host, learner, sim, carrier) -> key named, words of its own message
REFUSED = [
    (CUDA, "cuda", "mujoco", "cpu", "training.collector_tensor_device", "SOAKLAB_ALLOW_CUDA_LEARNER_CPU_CARRIER"),
    (CUDA, "cuda", "mjwarp", "cuda", "training.collector_tensor_device", "no host-bridge carrier"),
    (CUDA, "cpu", "mjwarp", "auto", "training.device", "needs a CUDA learner"),
    (CPU, "cpu", "mujoco", "cuda", "training.collector_tensor_device", "no CUDA device"),
    (CPU, "cpu", "mjwarp", "auto", "training.device", "needs a CUDA learner"),
    (CPU, "cpu", "mjwarp", "cpu", "training.device", "needs a CUDA learner"),
    (CPU, "cpu", "mjwarp", "cuda", "training.device", "needs a CUDA learner"),
    (CPU, "cuda", "mujoco", "auto", "training.device", "no CUDA device"),
    (APPLE, "mps", "mujoco", "cuda", "training.collector_tensor_device", "never maps to Apple mps"),
    (CUDA, "cuda:2", "mujoco", "auto", "training.device", "2 visible CUDA device"),
    (CUDA, "cuda", "mujoco", "cuda:0", "training.collector_tensor_device", "no ordinal"),
    (CPU, "gpu", "mujoco", "auto", "training.device", "concrete torch device"),
]


@pytest.mark.parametrize(("host", "learner", "sim", "carrier", "key", "words"), REFUSED)
def test_carrier_table_refuses(host, learner, sim, carrier, key, words):
    with pytest.raises(SettingError) as info:
        resolve_devices(learner, carrier, sim, None, host)
    assert info.value.key == key
    assert words in str(info.value)


def test_pairing_refusal_is_its_own_message_not_the_no_cuda_one():
    with pytest.raises(SettingError) as info:
        resolve_devices("cuda", "cpu", "mujoco", None, CUDA)
    assert "no CUDA device" not in str(info.value)
    assert "CPU carrier with a CUDA learner" in str(info.value)


def test_pairing_opt_in_and_rocm_keep_the_cpu_carrier():
    assert resolve_devices("cuda", "cpu", "mujoco", None, CUDA, allow_cuda_learner_cpu_carrier=True).carrier == "cpu"
    rocm = HostCapabilities(cuda_device_count=1, cuda_free_bytes=(1 << 34,), rocm=True)
    assert resolve_devices("cuda", "cpu", "mujoco", None, rocm).carrier == "cpu"


def test_mps_sharing_only_for_mjwarp_on_cuda():
    assert resolve_devices("cuda", "auto", "mjwarp", "mps", CUDA).carrier == "cuda:0"
    with pytest.raises(SettingError) as info:
        resolve_devices("cuda", "auto", "mujoco", "mps", CUDA)
    assert info.value.key == "training.cuda_process_sharing"


RUN = ("--algo", "flashsac", "--task", "g1_motion_tracking")


def resolve(cli, tmp_path, sim, *overrides, host, env=None):
    out = tmp_path / "run_config.json"
    return cli("config", "resolve", *RUN, "--sim", sim, "algo.replay_buffer_size=2048", *overrides,
               "--out", out, host=host, env=env), out


@pytest.mark.parametrize("carrier", ["auto", "cpu", "cuda"])
@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
@pytest.mark.parametrize("host_name", ["cuda", "cpu"])
def test_cli_carrier_table(cli, tmp_path, host_name, sim, carrier):
    """Through the CLI: a CUDA learner on the CUDA host, a CPU learner on the CPU host."""
    host = CUDA_HOST if host_name == "cuda" else CPU_HOST
    learner = "cuda" if host_name == "cuda" else "cpu"
    result, out = resolve(cli, tmp_path, sim, f"training.device={learner}",
                          f"training.collector_tensor_device={carrier}", host=host)
    expected = {
        ("cuda", "mujoco", "auto"): "cuda:0",
        ("cuda", "mujoco", "cpu"): None,
        ("cuda", "mujoco", "cuda"): "cuda:0",
        ("cuda", "mjwarp", "auto"): "cuda:0",
        ("cuda", "mjwarp", "cpu"): "cuda:0",
        ("cuda", "mjwarp", "cuda"): None,
        ("cpu", "mujoco", "auto"): "cpu",
        ("cpu", "mujoco", "cpu"): "cpu",
        ("cpu", "mujoco", "cuda"): None,
        ("cpu", "mjwarp", "auto"): None,
        ("cpu", "mjwarp", "cpu"): None,
        ("cpu", "mjwarp", "cuda"): None,
    }[(host_name, sim, carrier)]
    if expected is None:
        assert result.code == 2
        line = one_line(result.err)
        assert "training.collector_tensor_device" in line or "training.device" in line
        assert not out.exists()
        return
    assert result.code == 0, result.err
    record = json.loads(out.read_text())
    assert record["config"]["env"]["collector_tensor_device"] == expected
    assert record["run"]["resolved_devices"]["collector_tensor"] == {
        "configured": carrier, "resolved": expected, "ignored": sim == "mjwarp",
        "reason": record["run"]["resolved_devices"]["collector_tensor"]["reason"],
    }
    assert f"collector_tensor {carrier} -> {expected}" in result.out  # the printed device mapping


def test_cli_pairing_refusal_and_opt_in(cli, tmp_path):
    result, out = resolve(cli, tmp_path, "mujoco", "training.device=cuda", "training.collector_tensor_device=cpu",
                          host=CUDA_HOST)
    line = one_line(result.err)
    assert result.code == 2 and "SOAKLAB_ALLOW_CUDA_LEARNER_CPU_CARRIER" in line and "no CUDA" not in line
    assert not out.exists()
    result, out = resolve(cli, tmp_path, "mujoco", "training.device=cuda", "training.collector_tensor_device=cpu",
                          host=CUDA_HOST, env={"SOAKLAB_ALLOW_CUDA_LEARNER_CPU_CARRIER": "1"})
    assert result.code == 0, result.err
    assert json.loads(out.read_text())["run"]["resolved_devices"]["inference_transport"]["resolved"] == "host_ring"


def test_mjwarp_owner_on_a_cpu_host_fails_closed(cli, tmp_path):
    result, out = resolve(cli, tmp_path, "mjwarp", host=CPU_HOST)
    assert result.code == 2
    assert "training.device='cuda' (str): this host has no CUDA device" in one_line(result.err)
