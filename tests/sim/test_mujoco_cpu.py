"""The MuJoCo CPU backend: zero-copy views, packing, diagnostics, the raw physics path."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from soaklab.sim.mujoco_cpu import MujocoBackend
from soaklab.tasks.cartpole.env import build_model


def test_state_views_share_the_host_buffer():
    backend = MujocoBackend(build_model(), num_envs=4, decimation=2, num_threads=2)
    try:
        assert backend.state.data_ptr() == backend.buffer.ctypes.data
        assert backend.ctrl_tensor.data_ptr() == backend.ctrl.ctypes.data
        qpos = backend.view("qpos")
        backend.buffer[2, 1] = 1.25
        assert float(qpos[2, 1]) == 1.25
    finally:
        backend.close()


def test_step_packs_fresh_state_and_matches_plain_mj_step():
    model = build_model()
    backend = MujocoBackend(model, num_envs=3, decimation=2, num_threads=2)
    reference = mujoco.MjData(model)
    try:
        start = np.array([[0.1, 3.0], [0.0, 1.0], [-0.2, 0.5]])
        backend.reset(np.arange(3), start, np.zeros((3, 2)))
        reference.qpos[:] = start[1]
        mujoco.mj_forward(model, reference)
        backend.ctrl_tensor.copy_(torch.tensor([[0.5], [-0.3], [0.0]], dtype=torch.float64))
        reference.ctrl[:] = -0.3
        for _ in range(3):
            backend.step()
            for _ in range(2):
                mujoco.mj_step(model, reference)
        np.testing.assert_array_equal(backend.datas[1].qpos, reference.qpos)
        np.testing.assert_allclose(backend.view("qpos")[1].numpy(), reference.qpos, rtol=1e-6)
        np.testing.assert_allclose(backend.view("qvel")[1].numpy(), reference.qvel, rtol=1e-6)
    finally:
        backend.close()


def test_diagnostics_payload():
    backend = MujocoBackend(build_model(), num_envs=2, decimation=2, num_threads=1)
    try:
        diag = backend.diagnostics()
        assert diag["available"] is True and diag["backend_type"] == "mujoco"
        assert set(diag["diagnostics"]["cuda_graph"]) == {"requested", "enabled", "disable_reason"}
        assert diag["diagnostics"]["zero_copy_state"] is True
    finally:
        backend.close()


def test_threads_never_exceed_envs():
    backend = MujocoBackend(build_model(), num_envs=1, decimation=1, num_threads=8)
    try:
        assert backend.num_threads == 1
    finally:
        backend.close()


def test_the_simulators_instability_resets_are_counted_once():
    """MuJoCo's own check: a huge velocity is reset to the default pose with a warning; the backend
    counts each such reset once, per env, and take_unstable() reads and clears the count."""
    import mujoco
    import numpy as np

    from soaklab.sim.mujoco_cpu import MujocoBackend

    model = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><joint type='slide'/><geom size='.1'/></body></worldbody></mujoco>")
    backend = MujocoBackend(model, num_envs=3, decimation=2, num_threads=1)
    backend.reset(np.arange(3), np.zeros((3, 1)), np.array([[0.0], [1e20], [0.5]]))
    backend.step()
    assert backend.take_unstable() == 1 and backend.take_unstable() == 0
    assert abs(backend.datas[1].qvel[0]) < 1.0, "MuJoCo put the unstable env back at rest (then gravity acted)"
    backend.step()
    assert backend.take_unstable() == 0
    backend.close()
