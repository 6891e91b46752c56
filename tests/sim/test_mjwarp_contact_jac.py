"""The deterministic mode's contact Jacobian in one dof block, on warp's CPU device (the GPU's cost:
benchmarks/visits/2026-12-07-det-later/). Warp's CPU launches are serial, so the tests check what
the change is: which launches lose warp's ordered records, and that the physics is the two-block
kernel's within float32's reach."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

mjw = pytest.importorskip("mujoco_warp", reason="mujoco_warp is not installed (the warp extra)")
wp = pytest.importorskip("warp")

from mujoco_warp._src import constraint  # noqa: E402

from soaklab.sim import mjwarp_contact_jac  # noqa: E402
from soaklab.sim.mjwarp import MjwarpBackend  # noqa: E402

# 37 dofs (48 padded: two blocks of the default 32) with contacts on a plane from the first step.
BODIES = "".join(f'<body pos="{0.3 * i:.1f} 0 .09"><freejoint/><geom type="box" size=".1 .1 .1"/></body>'
                 for i in range(6))
XML = f"""<mujoco><option timestep="0.005" jacobian="dense"/><worldbody><geom type="plane" size="5 5 .1"/>
{BODIES}<body pos="-1 0 .3"><joint type="hinge" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 .3 0 -.35"
size=".04"/></body></worldbody></mujoco>"""


@pytest.fixture
def factory(monkeypatch):
    """mujoco_warp's factory as it was, put back after the test."""
    monkeypatch.setattr(constraint, "_efc_contact_jac_dense", constraint._efc_contact_jac_dense)
    return constraint._efc_contact_jac_dense


def run(backend: MjwarpBackend, steps: int = 6) -> np.ndarray:
    backend.ctrl_tensor.zero_()
    for _ in range(steps):
        backend.step()
    return backend.state.numpy().copy()


def test_the_mode_gives_a_wide_dense_model_one_block_and_the_physics_stays(factory, monkeypatch):
    model = mujoco.MjModel.from_xml_string(XML)
    monkeypatch.setenv("SOAKLAB_DETERMINISTIC", "1")
    one = MjwarpBackend(model, num_envs=2, decimation=2, device="cpu", use_graph=False)
    assert one.m.nv_pad == 48 and one.det_build.contact_jac_tile == 64 and one.m.block_dim.contact_jac_tiled == 64
    assert one.diagnostics()["diagnostics"]["contact_jac_tile"] == 64
    assert constraint._efc_contact_jac_dense is mjwarp_contact_jac._factory
    assert mjwarp_contact_jac.one_block(one.m) == 64  # idempotent
    one_block = run(one)
    again = MjwarpBackend(model, num_envs=2, decimation=2, device="cpu", use_graph=False)
    assert run(again).tobytes() == one_block.tobytes()
    two = MjwarpBackend(model, num_envs=2, decimation=2, device="cpu", use_graph=False)
    two.m.block_dim.contact_jac_tiled = 32  # mujoco_warp's two blocks, with warp's ordered records
    np.testing.assert_allclose(one_block, run(two), atol=1e-5)  # the sums' order: the last bits at most


def test_only_a_widened_tiles_deterministic_launch_loses_the_records(factory, monkeypatch):
    model = mujoco.MjModel.from_xml_string(XML)
    monkeypatch.setenv("SOAKLAB_DETERMINISTIC", "1")
    cone = MjwarpBackend(model, num_envs=1, decimation=1, device="cpu", use_graph=False).m.opt.cone
    built = []
    monkeypatch.setattr(mjwarp_contact_jac, "_original", [lambda *a: built.append(a[2:])])
    mjwarp_contact_jac._factory(64, cone, 256, True)  # the tile soaklab widened: one block, no records
    mjwarp_contact_jac._factory(32, cone, 256, True)  # mujoco_warp's own tile: its ordered records
    mjwarp_contact_jac._factory(64, cone, 0, False)  # the default mode: as mujoco_warp builds it
    assert built == [(0, False), (256, True), (0, False)]


def test_the_default_mode_and_a_narrow_model_keep_mujoco_warps_blocks(factory, monkeypatch):
    model = mujoco.MjModel.from_xml_string(XML)
    monkeypatch.delenv("SOAKLAB_DETERMINISTIC", raising=False)
    default = MjwarpBackend(model, num_envs=1, decimation=1, device="cpu", use_graph=False)
    assert default.det_build.contact_jac_tile is None and default.m.block_dim.contact_jac_tiled == 32
    assert constraint._efc_contact_jac_dense is factory
    narrow = mujoco.MjModel.from_xml_string(XML.replace(BODIES, BODIES[:BODIES.index("</body>") + 7]))
    monkeypatch.setenv("SOAKLAB_DETERMINISTIC", "1")
    small = MjwarpBackend(narrow, num_envs=1, decimation=1, device="cpu", use_graph=False)
    assert small.m.nv_pad <= 32 and small.det_build.contact_jac_tile is None  # one block of the default tile already
    assert small.m.block_dim.contact_jac_tiled == 32
