"""MuJoCo on the CPU: N `MjData` stepped by a thread pool (docs/assets-and-tasks.md).

`mj_step` releases the GIL, so T threads step T contiguous chunks of envs in
parallel. After each control step every env copies qpos | qvel | sensordata
into its row of one contiguous float32 host buffer; the task reads that buffer
through zero-copy torch views. Tasks express what they read (body frames,
contacts) as MuJoCo sensors, so the per-env Python work is three copies.
"""

from __future__ import annotations

import copy
import os
from concurrent.futures import ThreadPoolExecutor

import mujoco
import numpy as np
import torch

from soaklab.sim import ABSENT_DEPTH_M, diagnostics, static_geoms

# The warnings MuJoCo raises when the state blows up ("Nan, Inf or huge value in QPOS/QVEL/QACC ...
# The simulation is unstable."): it then resets that MjData to the model's default pose on its own,
# and the episode carries on from there. Counted here so the run can say so (soaklab.rl.diverged).
# The three are adjacent in mjtWarning: one slice, no fancy indexing (a copy) per env and step.
UNSTABLE = slice(int(mujoco.mjtWarning.mjWARN_BADQPOS), int(mujoco.mjtWarning.mjWARN_BADQACC) + 1)
assert UNSTABLE.stop - UNSTABLE.start == 3 and int(mujoco.mjtWarning.mjWARN_BADQVEL) == UNSTABLE.start + 1


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class MujocoBackend:
    """Host-bridge backend: state lives in host memory and is exposed as CPU tensors."""

    backend_type = "mujoco"

    @classmethod
    def build(cls, model: mujoco.MjModel, num_envs: int, decimation: int, *, device: str,
              num_threads: int | None, absent_geoms: np.ndarray | None = None) -> MujocoBackend:
        """The catalogue's stepper (soaklab.sim.build_stepper): host threads, whatever device the
        task's tensors live on (it reads the host buffer through views and moves what it needs)."""
        return cls(model, num_envs, decimation, num_threads, absent_geoms)

    def __init__(self, model: mujoco.MjModel, num_envs: int, decimation: int, num_threads: int | None = None,
                 absent_geoms: np.ndarray | None = None) -> None:
        self.model = model
        self.num_envs = num_envs
        self.decimation = decimation
        self.num_threads = max(1, min(num_threads or default_threads(), num_envs))
        # Each env's model: `model` itself, or in a world set (soaklab.sim) one copy per distinct set
        # of absent geoms, those geoms moved below the floor (MuJoCo places world-body geoms from
        # geom_pos at every step, so the copy is all it takes).
        self.models = [model] * num_envs if absent_geoms is None else _world_models(model, absent_geoms)
        self.datas = [mujoco.MjData(m) for m in self.models]
        widths = {"qpos": model.nq, "qvel": model.nv, "sensordata": model.nsensordata}
        self.slices: dict[str, slice] = {}
        start = 0
        for name, width in widths.items():
            self.slices[name] = slice(start, start + width)
            start += width
        self.buffer = np.zeros((num_envs, start), dtype=np.float32)
        self.ctrl = np.zeros((num_envs, model.nu), dtype=np.float64)
        # Zero-copy torch views over the host buffers.
        self.state = torch.from_numpy(self.buffer)
        self.ctrl_tensor = torch.from_numpy(self.ctrl)
        # (destination row slice, source MjData array) pairs, built once: packing is then
        # three plain copies per env with no attribute lookups.
        self._copies = [
            [(self.buffer[i, self.slices[name]], getattr(d, name)) for name in widths if widths[name]]
            for i, d in enumerate(self.datas)
        ]
        self.unstable = np.zeros(num_envs, dtype=np.int64)  # instability resets since the last take
        self._chunks = [c for c in np.array_split(np.arange(num_envs), self.num_threads) if len(c)]
        self._pool = ThreadPoolExecutor(self.num_threads, thread_name_prefix="mujoco")

    def view(self, name: str) -> torch.Tensor:
        """A zero-copy [N, width] view of qpos, qvel or sensordata."""
        return self.state[:, self.slices[name]]

    def _pack(self, i: int) -> None:
        for dst, src in self._copies[i]:
            np.copyto(dst, src, casting="same_kind")

    def _step_chunk(self, chunk: np.ndarray) -> None:
        # mj_step = mj_step1 (position/velocity stages) + mj_step2 (actuation, acceleration,
        # integration). Starting with mj_step2 (step1 of the current state is already done) and
        # ending with mj_step1 does the same work as `decimation` mj_steps but leaves body frames,
        # sensors and contacts computed for the state just integrated, so the task reads fresh
        # values at no extra cost. reset() runs mj_forward, which establishes that invariant.
        models, datas, ctrl, dec = self.models, self.datas, self.ctrl, self.decimation
        for i in chunk:
            d, m = datas[i], models[i]
            d.ctrl[:] = ctrl[i]
            mujoco.mj_step2(m, d)
            for _ in range(dec - 1):
                mujoco.mj_step(m, d)
            mujoco.mj_step1(m, d)
            warned = d.warning.number  # a view: zeroed once counted
            if warned[UNSTABLE].any():
                self.unstable[i] += int(warned[UNSTABLE].sum())
                warned[UNSTABLE] = 0
            self._pack(i)

    def take_unstable(self) -> int:
        """How many times MuJoCo reset an env as unstable since the last call."""
        count = int(self.unstable.sum())
        self.unstable[:] = 0
        return count

    def _physics_chunk(self, chunk: np.ndarray) -> None:
        models, datas, ctrl, dec = self.models, self.datas, self.ctrl, self.decimation
        for i in chunk:
            d, m = datas[i], models[i]
            d.ctrl[:] = ctrl[i]
            for _ in range(dec):
                mujoco.mj_step(m, d)

    def step(self) -> None:
        """Apply `ctrl` to every env, advance `decimation` physics steps, pack the state."""
        list(self._pool.map(self._step_chunk, self._chunks))

    def step_physics_only(self) -> None:
        """The raw physics ceiling: same MjData, pool and controls, plain mj_step, nothing packed."""
        list(self._pool.map(self._physics_chunk, self._chunks))

    def reset(self, env_ids: np.ndarray, qpos: np.ndarray, qvel: np.ndarray, pack: bool = True) -> None:
        """Set the selected envs to (qpos, qvel) and repack them; others are untouched."""
        if len(env_ids) == 0:
            return
        parts = [p for p in np.array_split(np.arange(len(env_ids)), self.num_threads) if len(p)]

        def work(part: np.ndarray) -> None:
            for k in part:
                i = int(env_ids[k])
                d, m = self.datas[i], self.models[i]
                mujoco.mj_resetData(m, d)
                d.qpos[:] = qpos[k]
                d.qvel[:] = qvel[k]
                mujoco.mj_forward(m, d)
                if pack:
                    self._pack(i)

        list(self._pool.map(work, parts))

    # mjSTATE_INTEGRATION: everything mj_step reads that it does not recompute (qpos, qvel, act,
    # time, controls, applied forces, mocap, the solver's warm start): MuJoCo's own definition of
    # the state a bitwise continuation needs.
    STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Each env's integration state, the packed buffer the task reads and the controls, as
        tensors: a checkpoint is plain data, loaded weights_only (soaklab.rl.resume)."""
        size = mujoco.mj_stateSize(self.model, self.STATE_SPEC)
        states = np.zeros((self.num_envs, size))
        for i, d in enumerate(self.datas):
            mujoco.mj_getState(self.model, d, states[i], self.STATE_SPEC)
        return {"integration": torch.from_numpy(states), "buffer": torch.from_numpy(self.buffer.copy()),
                "ctrl": torch.from_numpy(self.ctrl.copy())}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """The inverse of state_dict(). mj_step1 then recomputes the position and velocity stages, as
        the end of every step() leaves them (see _step_chunk): the next step2 finds what it expects."""
        states = state["integration"].numpy()
        if states.shape != (self.num_envs, mujoco.mj_stateSize(self.model, self.STATE_SPEC)):
            raise ValueError(f"physics state of shape {states.shape} does not fit {self.num_envs} envs of this model")
        for d, m, row in zip(self.datas, self.models, states, strict=True):
            mujoco.mj_setState(m, d, row, self.STATE_SPEC)
            mujoco.mj_step1(m, d)
        np.copyto(self.buffer, state["buffer"].numpy())  # in place: the task holds views of both
        np.copyto(self.ctrl, state["ctrl"].numpy())

    def diagnostics(self) -> dict:
        return diagnostics.available(
            self.backend_type,
            cuda_graph=diagnostics.cuda_graph(False, False, "CPU backend: physics runs in MjData on host threads"),
            num_envs=self.num_envs,
            num_threads=self.num_threads,
            decimation=self.decimation,
            state_width=int(self.buffer.shape[1]),
            zero_copy_state=bool(self.state.data_ptr() == self.buffer.ctypes.data),
        )

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _world_models(model: mujoco.MjModel, absent_geoms: np.ndarray) -> list[mujoco.MjModel]:
    """One model per env: a copy of `model` per distinct row of `absent_geoms`, shared by its envs."""
    static_geoms(model, absent_geoms)
    copies: dict[bytes, mujoco.MjModel] = {}
    models = []
    for row in np.asarray(absent_geoms, dtype=bool):
        key = row.tobytes()
        if key not in copies:
            world = copy.deepcopy(model)
            world.geom_pos[row, 2] -= ABSENT_DEPTH_M
            copies[key] = world
        models.append(copies[key])
    return models
