"""Simulation backends: MuJoCo on the CPU (mujoco_cpu) and MuJoCo Warp on the GPU (mjwarp).

A task builds its stepper here, from the backend's catalogue entry (soaklab.catalogue.BACKENDS): a
new backend is its module and its entry, and no task names it.

A world set (a motion library in one model, soaklab.tasks.g1_tracking.library) gives each world the
world-body geoms of its own clip's scene only: `absent_geoms`, [N, ngeom] bool, marks the static geoms
a world lacks, and each backend moves them `ABSENT_DEPTH_M` below its floor in those worlds, where no
robot reaches them (world-body geoms never collide with each other, nor with the floor).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from soaklab.catalogue import BACKENDS, load
from soaklab.errors import InvalidInput

ABSENT_DEPTH_M = 1000.0  # far below any scene (a terrain lies within 100 m of the origin, assets.terrain)


def build_stepper(sim: str, model: Any, num_envs: int, decimation: int, *, device: str,
                  num_threads: int | None, absent_geoms: np.ndarray | None = None) -> Any:
    """`num_envs` worlds of `model` (a mujoco.MjModel) on backend `sim`, each control step
    `decimation` physics steps: the stepper class its entry names, built by its `build` classmethod.
    `device`: where the task's tensors live; `num_threads`: host threads, for a backend that uses them."""
    stepper = load(BACKENDS[sim].stepper)
    if absent_geoms is None:
        return stepper.build(model, num_envs, decimation, device=device, num_threads=num_threads)
    if "absent_geoms" not in inspect.signature(stepper.build).parameters:
        raise InvalidInput(f"env.motion as a list on sim {sim}: its stepper has no per-world geoms (absent_geoms); "
                           "track one clip on it")
    return stepper.build(model, num_envs, decimation, device=device, num_threads=num_threads,
                         absent_geoms=absent_geoms)


def static_geoms(model: Any, absent_geoms: np.ndarray) -> np.ndarray:
    """The geoms some world lacks; each must be static (on the world body or welded to it), since a
    backend moves it by its position in the world frame."""
    geoms = np.flatnonzero(absent_geoms.any(axis=0))
    moving = [int(g) for g in geoms if model.body_weldid[model.geom_bodyid[g]] != 0]
    if moving:
        raise ValueError(f"geoms {moving} move with a body: only static geoms can be absent from a world")
    return geoms
