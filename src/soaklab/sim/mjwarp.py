"""MuJoCo Warp on the GPU: N worlds in one mujoco_warp `Data` (docs/assets-and-tasks.md).

Imported lazily (warp and mujoco_warp load only when this backend is built), so
CPU machines never need them. One control step is the same sequence as the CPU
backend's: `step2`, `decimation - 1` full steps, `step1`, so body frames, sensors
and contacts are fresh for the state just integrated; it is captured once in a
CUDA graph and replayed. A masked reset (`reset_data` for the selected worlds,
their qpos/qvel written from staging, `step1`) is a second graph. Both end with a
pack of qpos | qvel | sensordata into one float32 buffer, the layout the CPU
backend gives the task. Warp runs on its own stream, ordered against torch's
current stream with stream waits: no host synchronisation per step.

Per-world contact and constraint sizes matter: oversizing them made stepping 5x
slower on the H200 (benchmarks/archive/gpu/README.md). For the G1 scene nconmax 48 holds
its contacts; njmax 256 holds their rows (up to 4 per foot contact) plus one per
joint at its limit: 192 overflowed once policies drove joints to their limits
(joint-limit action bounds, the bending-down reference). Overflow is never silent: mujoco_warp sets a
per-world bitmask, which `check_overflow` turns into an error naming the knob.

On warp's CPU device (`device="cpu"`) the same kernels run compiled for the host, one launch at a
time, with no streams and no graphs: slow, but the same float32 physics as on the GPU, which is what
a sim-to-sim evaluation needs on a machine without one (CI). Training never steps it there: the
settings contract keeps `sim=mjwarp` on a CUDA learner.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch

from soaklab.errors import InvalidInput, RuntimeFailure
from soaklab.host import determinism
from soaklab.sim import ABSENT_DEPTH_M, diagnostics, static_geoms
from soaklab.sim.mjwarp_exact_adds import ExactAdds

DEFAULT_NCONMAX = 48
DEFAULT_NJMAX = 256  # 48 contacts x 4 rows + 29 joint-limit rows, rounded up


def _kernels(wp: Any) -> tuple[Any, Any]:
    @wp.kernel(module="unique")
    def pack(qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float), sensordata: wp.array2d(dtype=float),
             out: wp.array2d(dtype=float)):
        w, j = wp.tid()
        nq = qpos.shape[1]
        nv = qvel.shape[1]
        if j < nq:
            out[w, j] = qpos[w, j]
        elif j < nq + nv:
            out[w, j] = qvel[w, j - nq]
        else:
            out[w, j] = sensordata[w, j - nq - nv]

    @wp.kernel(module="unique")
    def apply_reset(mask: wp.array(dtype=bool), qpos_in: wp.array2d(dtype=float), qvel_in: wp.array2d(dtype=float),
                    qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float)):
        w, j = wp.tid()
        if not mask[w]:
            return
        if j < qpos.shape[1]:
            qpos[w, j] = qpos_in[w, j]
        if j < qvel.shape[1]:
            qvel[w, j] = qvel_in[w, j]

    return pack, apply_reset


# training.deterministic on a model whose Jacobian layout MuJoCo may choose (mjJAC_AUTO): the dense one.
# mujoco_warp 4.0.0's sparse layout (its choice above 32 dofs: the G1 has 35) accumulates H = J'DJ in
# kernels whose deterministic reductions warp sizes for the worst case, nworld x njmax x nv(nv+1)/2
# records, sorted in full on every replay of a captured step: at 1024 G1 worlds a 7 GB sort buffer,
# more than one warp array may hold, so the capture failed and the step ran eagerly (2,297 env-steps/s
# on an H100, benchmarks/visits/2026-12-07-det-deploy/). The dense kernels reduce H per world in tiles,
# without records. A model that names its layout keeps it.
DENSE_REASON = ("deterministic mode: the dense Jacobian (mujoco_warp's sparse one sizes its ordered "
                "reductions at nworld x njmax x nv(nv+1)/2 records)")


def mjw_sparse(model: mujoco.MjModel) -> bool:
    """Whether mujoco_warp steps `model` with the sparse Jacobian (its own rule, not MuJoCo's)."""
    from mujoco_warp._src.io import is_sparse  # the pinned 4.0.0's rule: AUTO is sparse above 32 dofs

    return bool(is_sparse(model))


def dense_copy(model: mujoco.MjModel) -> mujoco.MjModel:
    """A copy of `model` with the dense Jacobian; the caller's model is left as it was."""
    dense = copy.copy(model)  # MjModel's copy is a deep one
    dense.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    return dense


def deterministic_host_model(model: mujoco.MjModel) -> tuple[mujoco.MjModel, str | None]:
    """The MuJoCo model training.deterministic steps (before put_model), and why it is not `model`:
    the dense copy of a model that leaves its layout to MuJoCo where mujoco_warp would pick sparse."""
    from soaklab.sim import mjwarp_sorts

    mjwarp_sorts.check_version()  # before mjw_sparse reads the pinned release's private rule
    if model.opt.jacobian == mujoco.mjtJacobian.mjJAC_AUTO and mjw_sparse(model):
        return dense_copy(model), DENSE_REASON
    return model, None


@dataclass(frozen=True)
class DeterministicBuild:
    """What make_deterministic gave a device model beyond opt.deterministic (the backend's diagnostics)."""

    contact_jac_tile: int | None  # soaklab.sim.mjwarp_contact_jac's one block, or mujoco_warp's own blocks
    exact_adds: ExactAdds  # its launches built without ordered records: names() (soaklab.sim.mjwarp_exact_adds)


def make_deterministic(mjw: Any, m: Any, model: mujoco.MjModel) -> DeterministicBuild:
    """training.deterministic on mujoco_warp's `m` (put from `model`, before put_data: the solver's
    scratch is sized by it): contacts sorted, constraint rows in canonical order, float atomics reduced
    in a fixed order (warp's RUN_TO_RUN on those kernels alone: warp's global mode would recompile every
    kernel of mujoco_warp, which it does not support). The backend and scripts/gpu/warmup.py build it
    here alone, so a ceiling is timed on the step a run takes."""
    from soaklab.sim import mjwarp_contact_jac, mjwarp_exact_adds, mjwarp_sorts

    m.opt.deterministic = int(mjw.DeterminismType.ALL)
    # mujoco_warp 4.0.0 leaves its CONTACTS and CONSTRAINT sorts as empty hooks: soaklab's fill them
    mjwarp_sorts.install(mjw, m)
    # the contact Jacobian's J.qvel in one dof block: one add per row, no ordered records; and the
    # launches whose adds this model makes exact in any order: no ordered records either
    return DeterministicBuild(mjwarp_contact_jac.one_block(m), mjwarp_exact_adds.install(model))


def raised_where(exc: BaseException) -> str:
    """Where an exception was raised, and the last call outside warp that led there: a capture that
    fails in warp's own code is fixed at the caller (mujoco_warp's or soaklab's)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "no traceback"
    last = frames[-1]
    where = f"raised at {Path(last.filename).name}:{last.lineno} in {last.name}"
    spec = importlib.util.find_spec("warp")  # warp's own folder: a checkout under a folder named warp is not it
    warp_dir = str(Path(spec.origin).parent) + os.sep if spec is not None and spec.origin else None
    outside = [f for f in frames if warp_dir is None or not f.filename.startswith(warp_dir)]
    if outside and outside[-1] is not last:
        caller = outside[-1]
        where += f", called from {'/'.join(Path(caller.filename).parts[-2:])}:{caller.lineno} in {caller.name}"
    return where


class MjwarpBackend:
    """Device-resident backend: state lives in GPU memory, exposed as zero-copy torch views."""

    backend_type = "mjwarp"

    @classmethod
    def build(cls, model: mujoco.MjModel, num_envs: int, decimation: int, *, device: str,
              num_threads: int | None, absent_geoms: np.ndarray | None = None) -> MjwarpBackend:
        """The catalogue's stepper (soaklab.sim.build_stepper): the task's tensors live where warp's
        arrays do, the GPU or warp's CPU device (evaluation on a machine without one); host threads
        do not apply."""
        if torch.device(device).type not in ("cuda", "cpu"):
            raise InvalidInput(f"sim mjwarp: the env's tensors must live on the GPU or the CPU, not {device}")
        return cls(model, num_envs, decimation, device=str(device), absent_geoms=absent_geoms)

    def __init__(self, model: mujoco.MjModel, num_envs: int, decimation: int, device: str = "cuda:0",
                 nconmax: int = DEFAULT_NCONMAX, njmax: int = DEFAULT_NJMAX, use_graph: bool = True,
                 absent_geoms: np.ndarray | None = None) -> None:
        import mujoco_warp as mjw
        import warp as wp

        self._wp, self._mjw = wp, mjw
        wp.init()
        self.jacobian_reason: str | None = None
        self.det_build = DeterministicBuild(None, ExactAdds(()))  # the default mode: mujoco_warp's own kernels
        if determinism.enabled():
            model, self.jacobian_reason = deterministic_host_model(model)
        self.model = model
        self.num_envs, self.decimation = num_envs, decimation
        self.nconmax, self.njmax = nconmax, njmax
        self.torch_device = torch.device(device)
        self.wp_device = wp.get_device(str(self.torch_device))
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        n, nq, nv, ns = num_envs, model.nq, model.nv, model.nsensordata
        self.slices = {"qpos": slice(0, nq), "qvel": slice(nq, nq + nv), "sensordata": slice(nq + nv, nq + nv + ns)}
        self._pack, self._apply_reset = _kernels(wp)
        with wp.ScopedDevice(self.wp_device):
            self.m = mjw.put_model(model)
            if determinism.enabled():  # training.deterministic (docs/determinism.md)
                self.det_build = make_deterministic(mjw, self.m, model)
            self.d = mjw.put_data(model, data, nworld=n, nconmax=nconmax, njmax=njmax)
            self._mask = wp.zeros(n, dtype=bool)
            self._reset_qpos = wp.zeros((n, nq), dtype=float)
            self._reset_qvel = wp.zeros((n, nv), dtype=float)
            self._state = wp.zeros((n, nq + nv + ns), dtype=float)
        if absent_geoms is not None:
            self._place_absent_geoms(absent_geoms)
        # Warp's stream takes the priority of the torch stream that builds the backend: a collector
        # that steps the envs ahead of a learner's update on the same GPU builds it under a
        # high-priority stream (training.collector_stream_priority); warp knows -1 (high) and 0.
        # Warp's CPU device has no streams: its launches complete in order, on the calling thread.
        self.stream: Any = None
        if self.wp_device.is_cuda:
            torch_priority = torch.cuda.current_stream(self.torch_device).priority
            self.stream = wp.Stream(self.wp_device, priority=-1) if torch_priority < 0 else self.wp_device.stream
        # Zero-copy torch views of the warp arrays (same storage: tested by data_ptr).
        self.views = {"qpos": wp.to_torch(self.d.qpos), "qvel": wp.to_torch(self.d.qvel),
                      "sensordata": wp.to_torch(self.d.sensordata)}
        self.state = wp.to_torch(self._state)
        self.ctrl_tensor = wp.to_torch(self.d.ctrl)
        self.overflow = wp.to_torch(self.d.overflow)
        self.reset_mask = wp.to_torch(self._mask)
        self.reset_qpos, self.reset_qvel = wp.to_torch(self._reset_qpos), wp.to_torch(self._reset_qvel)
        self.graph_requested = use_graph
        self.graph_disable_reason: str | None = None if use_graph else "disabled by the caller"
        self._step_graph = self._reset_graph = None
        # Run both sequences once eagerly: it loads every kernel module before any capture, and the
        # reset (with no world selected) establishes the invariant that kinematics are fresh.
        self._launch(self._step_ops)
        self._launch(self._reset_ops)
        if use_graph and not self.wp_device.is_cuda:
            self.graph_disable_reason = f"warp's {self.wp_device} device has no CUDA graphs"
        elif use_graph:
            self._capture()

    def _place_absent_geoms(self, absent_geoms: np.ndarray) -> None:
        """A world set (soaklab.sim): each world's absent geoms moved below the floor. mujoco_warp
        places static geoms once, in put_data (its kinematics skip them and reset_data keeps them),
        so their per-world frames in `geom_xpos` are the only place to move them; the model stays
        shared by every world."""
        static_geoms(self.model, absent_geoms)
        self._wp.synchronize_device(self.wp_device)  # put_data's copies land before torch writes
        xpos = self._wp.to_torch(self.d.geom_xpos)  # [N, ngeom, 3], this array's own storage
        rows = torch.as_tensor(np.asarray(absent_geoms, dtype=bool), device=xpos.device)
        xpos[..., 2] -= rows.to(xpos.dtype) * ABSENT_DEPTH_M

    # -- the work that is captured -----------------------------------------------------------------
    def _pack_state(self) -> None:
        width = self._state.shape[1]
        self._wp.launch(self._pack, dim=(self.num_envs, width),
                        inputs=[self.d.qpos, self.d.qvel, self.d.sensordata], outputs=[self._state])

    def _step_ops(self) -> None:
        mjw, m, d = self._mjw, self.m, self.d
        mjw.step2(m, d)
        for _ in range(self.decimation - 1):
            mjw.step(m, d)
        mjw.step1(m, d)
        self._pack_state()

    def _physics_ops(self) -> None:
        for _ in range(self.decimation):
            self._mjw.step(self.m, self.d)

    def _reset_ops(self) -> None:
        mjw, m, d = self._mjw, self.m, self.d
        mjw.reset_data(m, d, reset=self._mask)
        width = max(self.model.nq, self.model.nv)
        self._wp.launch(self._apply_reset, dim=(self.num_envs, width),
                        inputs=[self._mask, self._reset_qpos, self._reset_qvel], outputs=[d.qpos, d.qvel])
        # step1 (position and velocity stages, their sensors, collision) on every world: what the
        # control step ends with, so the next step2 starts from the same kind of state; a
        # recomputation for the worlds not reset (same state, same values). A full forward would
        # also run the constraint solver, which step2 runs anyway: about half the reset's cost.
        # Acceleration-stage sensors stay stale for reset worlds until their next step; the task
        # reads none (the scene's accelerometer is unused).
        mjw.step1(m, d)
        self._pack_state()

    def _capture(self) -> None:
        wp = self._wp
        try:
            with wp.ScopedDevice(self.wp_device), wp.ScopedStream(self.stream):
                with wp.ScopedCapture() as capture:
                    self._step_ops()
                self._step_graph = capture.graph
                with wp.ScopedCapture() as capture:
                    self._reset_ops()
                self._reset_graph = capture.graph
        except Exception as exc:  # eager stepping still works; the diagnostics say why, and where
            self._step_graph = self._reset_graph = None
            self.graph_disable_reason = f"capture failed: {type(exc).__name__}: {exc} ({raised_where(exc)})"

    def _launch(self, ops: Any, graph: Any = None) -> None:
        """Run `ops` (or its graph) on warp's stream, ordered after and before torch's current stream."""
        wp = self._wp
        if self.stream is None:  # the CPU device: in order, synchronous
            with wp.ScopedDevice(self.wp_device):
                ops()
            return
        torch_stream = wp.stream_from_torch(torch.cuda.current_stream(self.torch_device))
        self.stream.wait_stream(torch_stream)
        with wp.ScopedDevice(self.wp_device), wp.ScopedStream(self.stream):
            if graph is not None:
                wp.capture_launch(graph)
            else:
                ops()
        torch_stream.wait_stream(self.stream)

    # -- the backend API ---------------------------------------------------------------------------
    def view(self, name: str) -> torch.Tensor:
        """A zero-copy [N, width] view of qpos, qvel or sensordata (the warp array's own storage)."""
        return self.views[name]

    def step(self) -> None:
        """Apply `ctrl_tensor`, advance `decimation` physics steps, pack the state."""
        self._launch(self._step_ops, self._step_graph)

    def step_physics_only(self) -> None:
        """The raw physics ceiling: `decimation` plain steps, nothing packed (eager; see bench)."""
        self._launch(self._physics_ops)

    def reset_masked(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Reset the worlds where `mask` is set to rows of (qpos, qvel) [N, nq] / [N, nv]; no host sync."""
        self.stage_reset(mask, qpos, qvel)
        self.launch_reset()

    def stage_reset(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Write the reset buffers (torch ops on the current stream: a captured step may do this)."""
        self.reset_mask.copy_(mask)
        self.reset_qpos.copy_(qpos)
        self.reset_qvel.copy_(qvel)

    def launch_reset(self) -> None:
        """Reset the worlds selected by the staged buffers (the reset graph)."""
        self._launch(self._reset_ops, self._reset_graph)

    def reset(self, env_ids: torch.Tensor | np.ndarray, qpos: torch.Tensor | np.ndarray,
              qvel: torch.Tensor | np.ndarray) -> None:
        """The CPU backend's signature: rows `env_ids` set to (qpos, qvel), others untouched."""
        dev = self.torch_device
        ids = torch.as_tensor(env_ids, device=dev, dtype=torch.long)
        self.reset_mask.zero_()
        self.reset_mask[ids] = True
        self.reset_qpos[ids] = torch.as_tensor(qpos, device=dev, dtype=torch.float32)
        self.reset_qvel[ids] = torch.as_tensor(qvel, device=dev, dtype=torch.float32)
        self._launch(self._reset_ops, self._reset_graph)

    # mjSTATE_INTEGRATION, as mujoco_warp's Data holds it: everything a step reads that it does not
    # recompute (MuJoCo's own definition of the state a continuation needs; the CPU backend saves the
    # same with mj_getState). A field the model leaves empty (no actuator activations, no mocap
    # bodies) is an empty array and is skipped.
    INTEGRATION_FIELDS = ("time", "qpos", "qvel", "act", "history", "plastic", "qacc_warmstart", "ctrl",
                          "qfrc_applied", "xfrc_applied", "eq_active", "mocap_pos", "mocap_quat", "userdata")

    def _integration_arrays(self) -> dict[str, torch.Tensor]:
        out = {}
        for name in self.INTEGRATION_FIELDS:
            array = getattr(self.d, name, None)
            if array is not None and array.size:
                out[name] = self._wp.to_torch(array)
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Every world's integration state and the packed buffer the task reads, as host tensors (a
        resumable checkpoint, soaklab.rl.resume). Every launch ends with torch's stream waiting on
        warp's, so torch reads what the last step wrote."""
        return {**{name: view.detach().cpu().clone() for name, view in self._integration_arrays().items()},
                "buffer": self.state.detach().cpu().clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """The inverse of state_dict(), copied in place (the captured graphs hold these arrays). Then
        the reset sequence with no world selected recomputes the position and velocity stages, as the
        end of every step leaves them, and the saved packed buffer is put back over its pack."""
        arrays = self._integration_arrays()
        missing = sorted(set(arrays) - set(state))
        if missing:
            raise ValueError(f"mjwarp state lacks {', '.join(missing)}: saved from another model")
        for name, view in arrays.items():
            if tuple(view.shape) != tuple(state[name].shape):
                raise ValueError(f"mjwarp state {name} of shape {tuple(state[name].shape)} does not fit "
                                 f"{tuple(view.shape)} (another env count or model)")
            view.copy_(state[name].to(view.device))
        self.reset_mask.zero_()
        self.launch_reset()
        self.state.copy_(state["buffer"].to(self.state.device))

    def overflow_worlds(self) -> int:
        """Worlds whose contacts or constraints overflowed since their last reset (a host read)."""
        return int((self.overflow != 0).sum())

    def check_overflow(self) -> None:
        bits = int(np.bitwise_or.reduce(self.overflow.cpu().numpy()))
        if bits:
            names = [flag.name for flag in self._mjw.OverflowType if flag.value and flag.value & bits
                     and flag.name != "ALL"]
            raise RuntimeFailure(f"mjwarp overflow in {self.overflow_worlds()} of {self.num_envs} worlds "
                                 f"({', '.join(names)}): raise the per-world sizes (nconmax={self.nconmax}, "
                                 f"njmax={self.njmax})")

    def take_unstable(self) -> int:
        """MJWarp resets no world as unstable: a blown-up world's NaN reaches the run's finiteness check."""
        return 0

    def diagnostics(self) -> dict:
        enabled = self._step_graph is not None
        return diagnostics.available(
            self.backend_type,
            cuda_graph=diagnostics.cuda_graph(self.graph_requested, enabled,
                                              None if enabled else self.graph_disable_reason),
            selected_reset_graph=diagnostics.cuda_graph(self.graph_requested, self._reset_graph is not None,
                                                        None if self._reset_graph is not None
                                                        else self.graph_disable_reason),
            num_envs=self.num_envs, decimation=self.decimation, nconmax=self.nconmax, njmax=self.njmax,
            overflow_worlds=self.overflow_worlds(),  # a host read: diagnostics are a cold-path snapshot
            zero_copy_state=all(v.data_ptr() == getattr(self.d, k).ptr for k, v in self.views.items()),
            device=str(self.torch_device), deterministic=int(self.m.opt.deterministic),
            jacobian="sparse" if self.m.is_sparse else "dense", jacobian_reason=self.jacobian_reason,
            contact_jac_tile=self.det_build.contact_jac_tile, exact_adds=list(self.det_build.exact_adds.names()),
        )

    def close(self) -> None:
        self._step_graph = self._reset_graph = None
