"""ManagerRng: seed validation and an exact state round trip."""

from __future__ import annotations

import pytest
import torch

from soaklab.errors import SettingError
from soaklab.tasks.rng import ManagerRng


def test_state_round_trips_exactly():
    rng = ManagerRng(7)
    rng.uniform((5,))
    state = rng.get_state()
    first = [rng.uniform((3, 4)), rng.randint(100, (6,)), rng.categorical(torch.tensor([0.2, 0.8]), 5)]
    rng.set_state(state)
    again = [rng.uniform((3, 4)), rng.randint(100, (6,)), rng.categorical(torch.tensor([0.2, 0.8]), 5)]
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))


def test_state_is_a_cpu_tensor_copy():
    rng = ManagerRng(1)
    state = rng.get_state()
    assert state.device.type == "cpu" and state.dtype == torch.uint8
    rng.uniform((10,))
    assert not torch.equal(state, rng.get_state())


def test_same_seed_same_stream_different_seed_different_stream():
    assert torch.equal(ManagerRng(3).uniform((8,)), ManagerRng(3).uniform((8,)))
    assert not torch.equal(ManagerRng(3).uniform((8,)), ManagerRng(4).uniform((8,)))


@pytest.mark.parametrize("seed", [True, -1, 1.0, "1", None, 2**63])
def test_bad_seed_fails_closed(seed):
    with pytest.raises(SettingError) as info:
        ManagerRng(seed)
    assert str(info.value).startswith("env.seed=")


def test_uniform_bounds_and_device():
    values = ManagerRng(0).uniform((1000,), -2.0, 3.0)
    assert values.min() >= -2.0 and values.max() <= 3.0 and values.device.type == "cpu"
