"""A task's stepper, built from its backend's catalogue entry (soaklab.sim.build_stepper)."""

from __future__ import annotations

import pytest

from soaklab.catalogue import BACKENDS, load
from soaklab.errors import InvalidInput
from soaklab.sim import build_stepper
from soaklab.sim.mujoco_cpu import MujocoBackend
from soaklab.tasks.cartpole.env import build_model


def test_the_stepper_is_the_class_the_entry_names_built_with_the_tasks_settings():
    assert load(BACKENDS["mujoco"].stepper) is MujocoBackend
    backend = build_stepper("mujoco", build_model(), 3, 2, device="cpu", num_threads=2)
    try:
        assert type(backend) is MujocoBackend
        assert (backend.num_envs, backend.decimation, backend.num_threads) == (3, 2, 2)
    finally:
        backend.close()


def test_a_device_resident_stepper_refuses_tensors_off_its_devices_in_one_line():
    """MuJoCo Warp keeps the env's tensors where its arrays live: the GPU or warp's CPU device."""
    with pytest.raises(InvalidInput, match=r"^sim mjwarp: the env's tensors must live on the GPU or the CPU, not mps$"):
        build_stepper("mjwarp", build_model(), 2, 2, device="mps", num_threads=None)
