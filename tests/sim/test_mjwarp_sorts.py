"""soaklab's contact and constraint-row sorts for mujoco_warp's deterministic mode, on warp's CPU device.

Warp's CPU launches are serial, so the race the sorts close never shows here: the tests check the
invariance instead. Any order of the contact pool, or of each world's constraint row blocks, sorts to
the same bits, and a deterministic step whose hooks first shuffle (what the GPU's atomics do) equals
the unshuffled one bit for bit. The GPU check is tests/sim/test_mjwarp.py (marked gpu).
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest

mjw = pytest.importorskip("mujoco_warp", reason="mujoco_warp is not installed (the warp extra)")
wp = pytest.importorskip("warp")

from mujoco_warp._src import collision_driver, constraint  # noqa: E402

from soaklab.errors import InvalidInput  # noqa: E402
from soaklab.sim import mjwarp_sorts  # noqa: E402
from soaklab.sim.mjwarp import DENSE_REASON, MjwarpBackend, dense_copy, mjw_sparse  # noqa: E402

# Every constraint block: an equality (connect: 3 rows), a dof friction row, a joint limit row, and
# pyramidal contacts (4 rows each) of a box, a sphere and a capsule on a plane.
XML = """<mujoco><option timestep="0.005" jacobian="{jacobian}"/>
<worldbody><geom type="plane" size="5 5 .1"/>
<body pos="0 0 .09"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
<body pos=".5 0 .04"><freejoint/><geom type="sphere" size=".05"/></body>
<body name="arm" pos="-.5 0 .3"><joint type="hinge" range="-5 5" frictionloss=".1" axis="0 1 0"/>
  <geom type="capsule" fromto="0 0 0 .3 0 -.35" size=".04"/></body>
<body name="bob" pos="-.5 .3 .3"><freejoint/><geom type="sphere" size=".03"/></body>
</worldbody>
<equality><connect body1="bob" body2="world" anchor="-.5 .3 .3"/></equality></mujoco>"""
NWORLD, NSTEPS = 3, 4


# The G1's layout in the deterministic mode: dense (soaklab.sim.mjwarp.DENSE_REASON). A sparse
# Jacobian (a model that names it keeps it) goes through the same per-row gather plus its non-zeros and
# the Newton solver's JTDAJ blocks; "sparse" here passes too (checked 2026-12-07) but compiles
# mujoco_warp's sparse deterministic kernels cold in CI.
JACOBIANS = ["dense"]


@pytest.fixture(scope="module", params=JACOBIANS)
def scene(request):
    mm = mujoco.MjModel.from_xml_string(XML.format(jacobian=request.param))
    md = mujoco.MjData(mm)
    mm.jnt_range[0] = (-0.01, 0.01)  # the arm starts past its limit: a limit row from the first step
    md.qpos[14] = 0.2
    wp.init()
    return mm, md


def make(scene, deterministic: int = 0):
    mm, md = scene
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(mm)
        assert m.is_sparse == bool(mm.opt.jacobian == mujoco.mjtJacobian.mjJAC_SPARSE)
        m.opt.deterministic = deterministic
        d = mjw.put_data(mm, md, nworld=NWORLD, nconmax=24, njmax=96)
        qvel = d.qvel.numpy()
        qvel[:] = np.random.default_rng(0).normal(0, 0.3, qvel.shape)  # the worlds differ
        d.qvel.assign(qvel)
        mjw.forward(m, d)
    return m, d


def snapshot(pool) -> dict[str, np.ndarray]:
    return {f.name: getattr(pool, f.name).numpy().copy() for f in dataclasses.fields(pool)}


def restore(pool, saved: dict[str, np.ndarray]) -> None:
    for name, values in saved.items():
        getattr(pool, name).assign(values)


def shuffle_contacts(d, rng) -> None:
    """A random order of the valid contacts, as the atomic counter may give."""
    n = int(d.nacon.numpy()[0])
    order = rng.permutation(n)
    for name, values in snapshot(d.contact).items():
        if len(values):  # a field the model leaves empty (surfacevel without surface velocities)
            values[:n] = values[order]
            getattr(d.contact, name).assign(values)


def row_blocks(types: np.ndarray, ids: np.ndarray, n: int) -> list[list[int]]:
    """A world's first n rows as blocks of one (type, id): what one thread allocates at once."""
    starts = [r for r in range(n) if r == 0 or (types[r], ids[r]) != (types[r - 1], ids[r - 1])]
    return [list(range(a, b)) for a, b in zip(starts, [*starts[1:], n], strict=True)]


def shuffle_rows(d, rng) -> None:
    """A random order of each world's row blocks (the rows of one (type, id), allocated together by
    one thread), consistent with contact.efc_address."""
    nefc, types, ids = d.nefc.numpy(), d.efc.type.numpy(), d.efc.id.numpy()
    saved = snapshot(d.efc)
    new_of = np.tile(np.arange(d.njmax), (d.nworld, 1))
    for w in range(d.nworld):
        n = int(nefc[w])
        blocks = row_blocks(types[w], ids[w], n)
        order = [r for i in rng.permutation(len(blocks)) for r in blocks[i]]
        new_of[w, order] = np.arange(n)
        for name in mjwarp_sorts.ROW_FIELDS:
            values = saved[name]
            if values.ndim >= 2 and values.shape[1] >= d.njmax:
                values[w, :n] = values[w, order]
    if d.efc.J_rownnz.shape[1]:  # sparse: the non-zeros' storage and the JTDAJ blocks in a random order too
        relayout_nonzeros(d, saved, new_of, rng)
    restore(d.efc, saved)
    friction = d.dof_frictionadr.numpy()
    d.dof_frictionadr.assign(np.where(friction >= 0, np.take_along_axis(new_of, np.maximum(friction, 0), 1), friction))
    address, worlds = d.contact.efc_address.numpy(), d.contact.worldid.numpy()
    for c in range(int(d.nacon.numpy()[0])):
        valid = address[c] >= 0
        address[c, valid] = new_of[worlds[c], address[c, valid]]
    d.contact.efc_address.assign(address)


def relayout_nonzeros(d, saved: dict[str, np.ndarray], new_of: np.ndarray, rng) -> None:
    """The storage of each row block's non-zeros in a random block order (rows of a block adjacent,
    as the reservation gives), and the JTDAJ blocks renumbered and in a random order."""
    J, colind, rowadr, rownnz = (saved[k].copy() for k in ("J", "J_colind", "J_rowadr", "J_rownnz"))
    for w in range(d.nworld):
        n = int(d.nefc.numpy()[w])
        blocks = row_blocks(saved["type"][w], saved["id"][w], n)
        adr = 0
        for i in rng.permutation(len(blocks)):
            for r in blocks[i]:
                nnz, old = rownnz[w, r], rowadr[w, r]
                saved["J"][w, 0, adr:adr + nnz] = J[w, 0, old:old + nnz]
                saved["J_colind"][w, 0, adr:adr + nnz] = colind[w, 0, old:old + nnz]
                saved["J_rowadr"][w, r] = adr
                adr += nnz
        nblock = int(saved["jtdaj_nblock"][w])
        order = rng.permutation(nblock)
        saved["jtdaj_adr"][w, :nblock] = new_of[w, saved["jtdaj_adr"][w, :nblock]][order]
        saved["jtdaj_nrow"][w, :nblock] = saved["jtdaj_nrow"][w, :nblock][order]


def valid_contacts(d) -> dict[str, np.ndarray]:
    n = int(d.nacon.numpy()[0])
    return {name: values[:n] for name, values in snapshot(d.contact).items()}


def valid_rows(d) -> dict[str, np.ndarray]:
    """Each world's rows (and, sparse, its non-zeros and JTDAJ blocks) that the solver reads."""
    nefc = d.nefc.numpy()
    saved = snapshot(d.efc)
    out = {name: np.concatenate([saved[name][w, :nefc[w]].ravel() for w in range(d.nworld)])
           for name in mjwarp_sorts.ROW_FIELDS if saved[name].ndim >= 2 and saved[name].shape[1] >= d.njmax}
    out["dof_frictionadr"] = d.dof_frictionadr.numpy().copy()  # numpy() is a view on the CPU device
    assert (out["dof_frictionadr"] >= 0).sum() == d.nworld  # the hinge's friction row, in each world
    if saved["J_rownnz"].shape[1]:
        nnz = [int(saved["J_rownnz"][w, :nefc[w]].sum()) for w in range(d.nworld)]
        nblock = saved["jtdaj_nblock"]
        assert nblock.min() > 0  # Newton's blocks exist
        out |= {name: np.concatenate([saved[name][w, 0, :nnz[w]] for w in range(d.nworld)])
                for name in ("J", "J_colind")}
        out |= {name: np.concatenate([saved[name][w, :nblock[w]] for w in range(d.nworld)])
                for name in ("jtdaj_adr", "jtdaj_nrow")}
    return out


def assert_bitwise(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].tobytes() == b[name].tobytes(), name


def test_any_order_of_the_pools_sorts_to_the_same_bits(scene):
    m, d = make(scene)
    nefc, nacon = d.nefc.numpy(), int(d.nacon.numpy()[0])
    assert nacon >= 3 * NWORLD and d.ne.numpy().min() == 3 and d.nf.numpy().min() == 1 and d.nl.numpy().min() == 1
    contacts, rows = snapshot(d.contact), snapshot(d.efc)
    rng = np.random.default_rng(1)
    with wp.ScopedDevice("cpu"):
        mjwarp_sorts.sort_contacts(m, d)
        expected = valid_contacts(d)
        # sorted: by world, then geom pair
        assert np.all(np.diff(expected["worldid"] * 100 + expected["geom"][:, 0] * 10 + expected["geom"][:, 1]) >= 0)
        for _ in range(3):
            restore(d.contact, contacts)
            shuffle_contacts(d, rng)
            assert valid_contacts(d)["dist"].tobytes() != expected["dist"].tobytes()
            mjwarp_sorts.sort_contacts(m, d)
            assert_bitwise(valid_contacts(d), expected)

        restore(d.contact, contacts)
        mjwarp_sorts.sort_constraints(m, d)
        expected, address = valid_rows(d), d.contact.efc_address.numpy()[:nacon].copy()
        assert (d.nefc.numpy() == nefc).all()
        for w in range(d.nworld):  # MuJoCo's blocks: equality, friction, limit, contact
            assert list(d.efc.type.numpy()[w, :7]) == [0, 0, 0, 1, 3, 6, 6]
        for _ in range(3):
            restore(d.efc, rows)
            restore(d.contact, contacts)
            shuffle_rows(d, rng)
            mjwarp_sorts.sort_constraints(m, d)
            assert_bitwise(valid_rows(d), expected)
            assert d.contact.efc_address.numpy()[:nacon].tobytes() == address.tobytes()


def test_a_shuffled_deterministic_step_repeats_bit_for_bit(scene, monkeypatch):
    """The hooks installed (deterministic ALL): a run whose hooks first shuffle the pools equals the
    run that does not, bit for bit; without the sorts the shuffle changes the bits; the default mode
    agrees within float32 noise."""
    for module, name in ((collision_driver, "_sort_contacts"), (constraint, "_sort_constraints")):
        monkeypatch.setattr(module, name, getattr(module, name))  # restored after the test
    rng = np.random.default_rng(2)
    sort_c, sort_r = mjwarp_sorts.sort_contacts, mjwarp_sorts.sort_constraints

    def run(hooks) -> np.ndarray:
        m, d = make(scene, int(mjw.DeterminismType.ALL))
        collision_driver._sort_contacts, constraint._sort_constraints = hooks
        with wp.ScopedDevice("cpu"):
            for _ in range(NSTEPS):
                mjw.step(m, d)
        return np.concatenate([d.qpos.numpy().ravel(), d.qvel.numpy().ravel()])

    m, _ = make(scene, int(mjw.DeterminismType.ALL))
    mjwarp_sorts.install(mjw, m)
    assert collision_driver._sort_contacts is sort_c and constraint._sort_constraints is sort_r
    sorted_run = run((sort_c, sort_r))
    shuffled = run((lambda m, d: (shuffle_contacts(d, rng), sort_c(m, d)),
                    lambda m, d: (shuffle_rows(d, rng), sort_r(m, d))))
    assert sorted_run.tobytes() == shuffled.tobytes()
    unsorted = run((lambda m, d: shuffle_contacts(d, rng), lambda m, d: shuffle_rows(d, rng)))
    assert unsorted.tobytes() != sorted_run.tobytes()  # the shuffle is seen: the sorts are what equals
    default = run((lambda m, d: None, lambda m, d: None))
    np.testing.assert_allclose(sorted_run, default, atol=1e-4)


def test_the_default_mode_installs_nothing_and_the_mode_refuses_another_version(scene, monkeypatch):
    mm, _ = scene
    hooks = collision_driver._sort_contacts, constraint._sort_constraints
    monkeypatch.setattr(collision_driver, "_sort_contacts", hooks[0])
    monkeypatch.setattr(constraint, "_sort_constraints", hooks[1])
    monkeypatch.delenv("SOAKLAB_DETERMINISTIC", raising=False)
    backend = MjwarpBackend(mm, num_envs=1, decimation=1, device="cpu", use_graph=False)
    assert (collision_driver._sort_contacts, constraint._sort_constraints) == hooks
    assert backend.diagnostics()["diagnostics"]["deterministic"] == 0
    monkeypatch.setenv("SOAKLAB_DETERMINISTIC", "1")  # the mode: installed when the backend is built
    det = MjwarpBackend(mm, num_envs=2, decimation=1, device="cpu", use_graph=False)
    assert det.diagnostics()["diagnostics"]["deterministic"] == int(mjw.DeterminismType.ALL)
    # the scene names its layout (the fixture's): kept, no reason given
    named = "dense" if mm.opt.jacobian == mujoco.mjtJacobian.mjJAC_DENSE else "sparse"
    assert (det.diagnostics()["diagnostics"]["jacobian"], det.jacobian_reason) == (named, None)
    assert (collision_driver._sort_contacts, constraint._sort_constraints) == (mjwarp_sorts.sort_contacts,
                                                                              mjwarp_sorts.sort_constraints)
    det.step()
    assert np.isfinite(det.state.numpy()).all()
    monkeypatch.setattr(collision_driver, "_sort_contacts", hooks[0])
    monkeypatch.setattr(constraint, "_sort_constraints", hooks[1])
    monkeypatch.setattr(mjwarp_sorts.metadata, "version", lambda name: "4.1.0")
    with pytest.raises(InvalidInput, match=r"^training.deterministic=true: soaklab's contact and constraint "
                       r"sorts follow mujoco-warp 4.0.0; found mujoco-warp 4.1.0: install mujoco-warp==4.0.0 "
                       r"or set training.deterministic=false$"):
        mjwarp_sorts.install(mjw, backend.m)
    assert (collision_driver._sort_contacts, constraint._sort_constraints) == hooks


def test_the_mode_steps_a_model_of_automatic_layout_with_the_dense_jacobian(monkeypatch):
    """Above 32 dofs mujoco_warp picks the sparse Jacobian, whose ordered reductions are sized beyond
    what a captured step can hold at the runs' world counts: the mode steps a copy with the dense one,
    and says so; the caller's model keeps its layout, and a model that names one keeps it."""
    chain = "".join('<body pos="0 0 -.1"><joint axis="0 1 0"/><geom size=".02"/>' for _ in range(33))
    auto = mujoco.MjModel.from_xml_string(f"<mujoco><worldbody>{chain}{'</body>' * 33}</worldbody></mujoco>")
    assert mjw_sparse(auto) and not mjw_sparse(dense_copy(auto))
    assert auto.opt.jacobian == mujoco.mjtJacobian.mjJAC_AUTO
    assert dense_copy(auto).opt.jacobian == mujoco.mjtJacobian.mjJAC_DENSE
    monkeypatch.setenv("SOAKLAB_DETERMINISTIC", "1")
    for module, name in ((collision_driver, "_sort_contacts"), (constraint, "_sort_constraints")):
        monkeypatch.setattr(module, name, getattr(module, name))  # mujoco_warp's own, back after the test
    backend = MjwarpBackend(auto, num_envs=1, decimation=1, device="cpu", use_graph=False)
    diag = backend.diagnostics()["diagnostics"]
    assert (diag["jacobian"], diag["jacobian_reason"]) == ("dense", DENSE_REASON)
    assert backend.model is not auto and auto.opt.jacobian == mujoco.mjtJacobian.mjJAC_AUTO
    named = dense_copy(auto)
    named.opt.jacobian = mujoco.mjtJacobian.mjJAC_SPARSE  # named: kept, and the sorts' sparse path runs
    sparse = MjwarpBackend(named, num_envs=1, decimation=1, device="cpu", use_graph=False)
    assert (sparse.diagnostics()["diagnostics"]["jacobian"], sparse.jacobian_reason) == ("sparse", None)
    assert sparse.model is named and np.isfinite(sparse.state.numpy()).all()


def test_a_failed_capture_says_where_it_was_raised_and_who_called_warp():
    """The backend's graph_disable_reason names the frame that raised (in warp here) and the last
    frame outside warp that called it: the place to fix (a capture failed on the GPU in warp's own
    shape check, reached from mujoco_warp, and the reason named neither)."""
    from soaklab.sim.mjwarp import raised_where

    def allocate_too_much() -> None:
        wp.empty(shape=(2**31,), dtype=wp.int32, device="cpu")

    with pytest.raises(ValueError) as raised:
        allocate_too_much()
    where = raised_where(raised.value)
    assert where.startswith("raised at types.py:"), where
    assert "called from sim/test_mjwarp_sorts.py:" in where and "in allocate_too_much" in where, where
