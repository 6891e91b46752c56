"""The deterministic mode's launches built without ordered records where the model makes their adds
exact (soaklab.sim.mjwarp_exact_adds), on warp's CPU device: which models prove what, which launches
lose the records, and that a step's actuator adds are the one-add-per-dof the proof says (read from
mujoco_warp's own transmission)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

mjw = pytest.importorskip("mujoco_warp", reason="mujoco_warp is not installed (the warp extra)")
wp = pytest.importorskip("warp")

from mujoco_warp._src import derivative, forward, passive  # noqa: E402

from soaklab.sim import mjwarp_exact_adds as exact  # noqa: E402
from soaklab.sim.mjwarp import MjwarpBackend  # noqa: E402

# Two hinge arms, each driven by one position actuator (kv: a velocity derivative under implicitfast).
ARMS = """<mujoco><option timestep="0.005" integrator="implicitfast"/><worldbody>
<body pos="0 0 1"><joint name="a" type="hinge" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".04"/>
<body pos=".3 0 0"><joint name="b" type="hinge" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".04"/>
</body></body></worldbody><actuator>{actuators}</actuator></mujoco>"""
ONE_EACH = '<position joint="a" kp="50" kv="2"/><position joint="b" kp="50" kv="2"/>'
SHARED = '<position joint="a" kp="50" kv="2"/><position joint="a" kp="10" kv="1"/>'


@pytest.fixture
def fresh(monkeypatch):
    """mujoco_warp's own factories in place and no proofs, all put back after the test. A deterministic
    backend built by an earlier test of the process (test_mjwarp_sorts', test_env's) leaves the module's
    factories in front of mujoco_warp's: those are taken off, else the emptied originals are lost."""
    for module, attr, name, factory in ((forward, "_qfrc_actuator", "qfrc_actuator", exact._qfrc_actuator),
                                        (derivative, "_qderiv_actuator_passive_actuation_sparse",
                                         "qderiv_actuation", exact._qderiv_actuation),
                                        (passive, "_gravity_force", "gravity_force", exact._gravity_force)):
        current = getattr(module, attr)
        monkeypatch.setattr(module, attr, exact._originals[name] if current is factory else current)
    monkeypatch.setattr(exact, "_proved", {name: set() for name in exact._proved})
    monkeypatch.setattr(exact, "_refused", {name: set() for name in exact._refused})
    monkeypatch.setattr(exact, "_originals", {})
    monkeypatch.setenv("SOAKLAB_DETERMINISTIC", "1")


def model(actuators: str = ONE_EACH, gravcomp: bool = False) -> mujoco.MjModel:
    xml = ARMS.format(actuators=actuators)
    if gravcomp:
        xml = xml.replace('<body pos=".3', '<body gravcomp="1" pos=".3')
    return mujoco.MjModel.from_xml_string(xml)


def built(monkeypatch) -> list[tuple]:
    """The originals replaced by recorders of their arguments (after install put the factories in)."""
    calls: list[tuple] = []
    for name in exact._originals:
        monkeypatch.setitem(exact._originals, name, lambda *a, name=name: calls.append((name, *a)))
    return calls


def test_a_model_of_one_actuator_per_hinge_and_no_gravcomp_proves_all_three(fresh, monkeypatch):
    m = model()
    backend = MjwarpBackend(m, num_envs=2, decimation=2, device="cpu", use_graph=False)
    assert backend.det_build.exact_adds.names() == ("qfrc_actuator", "qderiv_actuation", "gravity_force")
    assert backend.diagnostics()["diagnostics"]["exact_adds"] == ["qfrc_actuator", "qderiv_actuation", "gravity_force"]
    assert forward._qfrc_actuator is exact._qfrc_actuator
    assert backend.m.nv == m.nv and backend.m.nM == m.nM  # the keys mujoco_warp's call sites pass
    backend.ctrl_tensor.fill_(0.5)
    for _ in range(3):
        backend.step()
    # the proof's premise, as mujoco_warp's transmission wrote it: one moment entry per actuator, on
    # distinct dofs, so each address of the two actuator launches takes one add
    assert (backend.d.moment_rownnz.numpy() == 1).all()
    cols = backend.d.moment_colind.numpy()[:, :m.nu]
    assert all(len(set(row.tolist())) == m.nu for row in cols)
    assert np.isfinite(backend.state.numpy()).all()
    calls = built(monkeypatch)
    exact._qfrc_actuator(m.nv, True)
    exact._qderiv_actuation(m.nM, True)
    exact._gravity_force(True)
    exact._qfrc_actuator(m.nv, False)  # the default mode: as mujoco_warp builds it
    assert calls == [("qfrc_actuator", 0, False), ("qderiv_actuation", 0, False), ("gravity_force", False),
                     ("qfrc_actuator", m.nv, False)]


def test_a_shared_joint_or_gravcomp_keeps_the_records_and_refuses_its_key_for_every_model(fresh, monkeypatch):
    assert not exact.one_add_per_dof(model(SHARED)) and exact.one_add_per_dof(model())
    assert not exact.no_gravcomp(model(gravcomp=True))
    proved = model()
    first = exact.install(proved)
    assert first.names() == ("qfrc_actuator", "qderiv_actuation", "gravity_force")
    # a model of the same nv and nM that does not prove them, built later in the process: from then on
    # the keys keep their records for both (the first model's graphs were captured already), and the
    # first model's diagnostics say so, never what was true when it was built
    assert exact.install(model(SHARED, gravcomp=True)).names() == ()
    assert exact.install(proved).names() == () and first.names() == ()
    calls = built(monkeypatch)
    exact._qfrc_actuator(proved.nv, True)
    exact._qderiv_actuation(proved.nM, True)
    exact._gravity_force(True)
    assert calls == [("qfrc_actuator", proved.nv, True), ("qderiv_actuation", proved.nM, True),
                     ("gravity_force", True)]


def test_the_default_mode_installs_nothing(fresh, monkeypatch):
    monkeypatch.delenv("SOAKLAB_DETERMINISTIC")
    factory = forward._qfrc_actuator
    backend = MjwarpBackend(model(), num_envs=1, decimation=1, device="cpu", use_graph=False)
    assert backend.det_build.exact_adds.names() == () and forward._qfrc_actuator is factory
