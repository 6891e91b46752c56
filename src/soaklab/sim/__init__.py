"""Simulation backends: MuJoCo on the CPU (mujoco_cpu) and MuJoCo Warp on the GPU (mjwarp).

A task builds its stepper here, from the backend's catalogue entry (soaklab.catalogue.BACKENDS): a
new backend is its module and its entry, and no task names it.
"""

from __future__ import annotations

from typing import Any

from soaklab.catalogue import BACKENDS, load


def build_stepper(sim: str, model: Any, num_envs: int, decimation: int, *, device: str,
                  num_threads: int | None) -> Any:
    """`num_envs` worlds of `model` (a mujoco.MjModel) on backend `sim`, each control step
    `decimation` physics steps: the stepper class its entry names, built by its `build` classmethod.
    `device`: where the task's tensors live; `num_threads`: host threads, for a backend that uses them."""
    stepper = load(BACKENDS[sim].stepper)
    return stepper.build(model, num_envs, decimation, device=device, num_threads=num_threads)
