"""The MJWarp backend on a real GPU; skipped (with the reason) where there is none."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU (CUDA)", allow_module_level=True)
pytest.importorskip("mujoco_warp", reason="mujoco_warp is not installed (the warp extra)")

from soaklab.config.compose import compose  # noqa: E402
from soaklab.errors import RuntimeFailure  # noqa: E402
from soaklab.sim.mjwarp import DENSE_REASON, MjwarpBackend  # noqa: E402
from soaklab.sim.mujoco_cpu import MujocoBackend  # noqa: E402
from soaklab.tasks.g1_tracking.env import TrackingConfig, build_tracking_model  # noqa: E402

# float32 MJWarp against float64 MuJoCo from the same state, 5 control steps, on the H200
# (2026-11-29): max |diff| qpos 5.3e-6, qvel and position/velocity-stage sensors 2.8e-4. The bounds
# leave ~20x margin. Acceleration-stage sensors (the scene's accelerometer; the task reads none) are
# cleared by mujoco_warp's step1 and left stale by MuJoCo's, so they are not compared.
QPOS_TOL, QVEL_TOL = 1e-4, 5e-3


@pytest.fixture(scope="module")
def tracking(g1_assets):
    cfg = TrackingConfig.from_config(compose("flashsac", "g1_motion_tracking", "mujoco", []).config["task"])
    model, _, _ = build_tracking_model(str(g1_assets.scene), cfg)
    return model, cfg.decimation


def stage_columns(backend, model, acc: bool) -> torch.Tensor:
    """State columns of qpos, qvel and the sensors computed at (acc) or before (not acc) the acceleration stage."""
    base = backend.slices["sensordata"].start
    cols = [] if acc else list(range(base))
    for i in range(model.nsensor):
        if (int(model.sensor_needstage[i]) == int(mujoco.mjtStage.mjSTAGE_ACC)) == acc:
            adr, dim = int(model.sensor_adr[i]), int(model.sensor_dim[i])
            cols += range(base + adr, base + adr + dim)
    return torch.tensor(cols, dtype=torch.long)


def start_state(model, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The home keyframe with a small per-world joint offset, at rest."""
    rng = np.random.default_rng(seed)
    qpos = np.tile(model.key_qpos[0] if model.nkey else model.qpos0, (n, 1))
    qpos[:, 7:] += rng.uniform(-0.05, 0.05, (n, model.nq - 7))
    return qpos, np.zeros((n, model.nv))


def test_views_share_storage_and_the_step_is_a_cuda_graph(tracking):
    model, dec = tracking
    backend = MjwarpBackend(model, num_envs=8, decimation=dec)
    assert backend.view("qpos").data_ptr() == backend.d.qpos.ptr
    assert backend.view("sensordata").data_ptr() == backend.d.sensordata.ptr
    assert backend.ctrl_tensor.data_ptr() == backend.d.ctrl.ptr
    diag = backend.diagnostics()["diagnostics"]
    assert diag["cuda_graph"] == {"requested": True, "enabled": True, "disable_reason": None}
    assert diag["zero_copy_state"] is True


def test_same_state_same_physics_as_cpu_mujoco(tracking):
    model, dec = tracking
    n = 4
    qpos, qvel = start_state(model, n)
    gpu = MjwarpBackend(model, num_envs=n, decimation=dec)
    cpu = MujocoBackend(model, num_envs=n, decimation=dec, num_threads=1)
    try:
        gpu.reset(np.arange(n), qpos, qvel)
        cpu.reset(np.arange(n), qpos, qvel)
        ctrl = torch.as_tensor(qpos[:, 7:], dtype=torch.float64)  # hold the start pose
        worst = {}
        for _ in range(5):
            gpu.ctrl_tensor.copy_(ctrl)
            cpu.ctrl_tensor.copy_(ctrl)
            gpu.step()
            cpu.step()
            diff = (gpu.state.cpu().double() - cpu.state.double()).abs()
            for name in ("qpos", "qvel"):
                worst[name] = max(worst.get(name, 0.0), float(diff[:, gpu.slices[name]].max()))
            worst["pos_vel_sensors"] = max(worst.get("pos_vel_sensors", 0.0),
                                           float(diff[:, stage_columns(gpu, model, acc=False)].max()))
        acc = stage_columns(gpu, model, acc=True)
        print(f"max |mjwarp - mujoco| over 5 control steps: {worst}; acc-stage sensor columns {acc.tolist()}: "
              f"gpu {gpu.state[:, acc.cuda()].cpu().tolist()} cpu {cpu.state[:, acc].tolist()}")
        assert worst["qpos"] < QPOS_TOL and worst["qvel"] < QVEL_TOL, worst
        assert torch.isfinite(gpu.state).all()
    finally:
        cpu.close()


def test_masked_reset_touches_only_the_selected_worlds(tracking):
    model, dec = tracking
    n = 6
    backend = MjwarpBackend(model, num_envs=n, decimation=dec)
    qpos, qvel = start_state(model, n)
    backend.reset(np.arange(n), qpos, qvel)
    for _ in range(3):
        backend.step()
    before = backend.state.clone()
    target_qpos, target_qvel = start_state(model, n, seed=1)
    mask = torch.tensor([True, False, True, False, False, True], device="cuda")
    backend.reset_masked(mask, torch.as_tensor(target_qpos, dtype=torch.float32, device="cuda"),
                         torch.as_tensor(target_qvel, dtype=torch.float32, device="cuda"))
    after = backend.state
    q = backend.slices["qpos"]
    torch.testing.assert_close(after[mask][:, q].cpu().double(), torch.as_tensor(target_qpos[mask.cpu().numpy()]),
                               atol=1e-6, rtol=0)
    # The reset recomputes every world (step1): positions, velocities and their sensors stay as they
    # were; acceleration-stage sensors are not part of the comparison.
    keep = stage_columns(backend, model, acc=False).cuda()
    torch.testing.assert_close(after[~mask][:, keep], before[~mask][:, keep])
    assert backend.overflow_worlds() == 0


def test_overflow_is_detected_and_names_the_knob(tracking):
    model, dec = tracking
    backend = MjwarpBackend(model, num_envs=4, decimation=dec, njmax=2)
    qpos, qvel = start_state(model, 4)
    backend.reset(np.arange(4), qpos, qvel)
    backend.step()
    assert backend.overflow_worlds() > 0
    with pytest.raises(RuntimeFailure, match="njmax=2"):
        backend.check_overflow()


def test_steady_state_steps_never_synchronise_the_host(tracking):
    model, dec = tracking
    n = 64
    backend = MjwarpBackend(model, num_envs=n, decimation=dec)
    qpos, qvel = start_state(model, n)
    backend.reset(np.arange(n), qpos, qvel)
    mask = torch.zeros(n, dtype=torch.bool, device="cuda")
    mask[::7] = True
    target_qpos = torch.as_tensor(qpos, dtype=torch.float32, device="cuda")
    target_qvel = torch.zeros(n, model.nv, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(10):
            backend.ctrl_tensor.copy_(target_qpos[:, 7:])
            backend.step()
            _ = backend.state.sum(dim=1)
            backend.reset_masked(mask, target_qpos, target_qvel)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert torch.isfinite(backend.state).all()


def test_the_backend_takes_the_priority_of_the_stream_that_builds_it(tracking):
    """training.collector_stream_priority=high: the collector builds its envs under a high-priority
    torch stream (rl/collector.py), and warp's stream for the physics follows it."""
    from dataclasses import replace

    from soaklab.rl.collector import collector_stream

    model, decimation = tracking
    # collector_stream reads the typed run (not a mapping): a CUDA carrier asking for high priority.
    run = compose("flashsac", "g1_motion_tracking", "mjwarp", []).run
    config = replace(run, env=replace(run.env, collector_tensor_device="cuda:0"),
                     training=replace(run.training, collector_stream_priority="high"))
    stream = collector_stream(config)
    assert stream is not None and stream.priority < 0
    with torch.cuda.stream(stream):
        high = MjwarpBackend(model, 8, decimation, device="cuda:0")
    plain = MjwarpBackend(model, 8, decimation, device="cuda:0")
    assert high.stream.priority == -1 and plain.stream.priority == 0
    with torch.cuda.stream(stream):
        high.step()
    torch.cuda.synchronize()
    assert torch.isfinite(high.state).all()
    default = replace(config, training=replace(config.training, collector_stream_priority="default"))
    assert collector_stream(default) is None


@pytest.mark.parametrize("n", [64, 1024])
def test_the_deterministic_mode_repeats_its_captured_steps_bit_for_bit(tracking, monkeypatch, n):
    """training.deterministic (SOAKLAB_DETERMINISTIC=1 in the process): opt.deterministic = ALL, the
    step still a CUDA graph, and two backends stepped from one state through contacts agree bit for
    bit (docs/determinism.md). Without soaklab's sorts, 64 worlds differed from the first step (H200,
    max |diff| 1e-5 after one step, 1e-4 after ten). 1024 worlds, the runs' count: there the capture
    of the sparse Jacobian failed on an H100 (2026-12-07; the runs stepped eagerly, still bit for bit, at
    2.3 k env-steps/s), hence the dense one in this mode (soaklab.sim.mjwarp.DENSE_REASON)."""
    from mujoco_warp._src import collision_driver, constraint

    from soaklab.host.determinism import ENV
    from soaklab.sim import mjwarp_sorts

    model, dec = tracking
    monkeypatch.setenv(ENV, "1")
    for module, name in ((collision_driver, "_sort_contacts"), (constraint, "_sort_constraints"),
                         (constraint, "_efc_contact_jac_dense")):
        monkeypatch.setattr(module, name, getattr(module, name))  # mujoco_warp's own, back after the test
    qpos, qvel = start_state(model, n, seed=3)
    states = []
    for _ in range(2):
        backend = MjwarpBackend(model, num_envs=n, decimation=dec)
        diag = backend.diagnostics()["diagnostics"]
        assert diag["deterministic"] == int(backend._mjw.DeterminismType.ALL)
        assert (diag["jacobian"], diag["jacobian_reason"]) == ("dense", DENSE_REASON)
        assert diag["contact_jac_tile"] == 64  # the G1's 48 padded dofs in one block (mjwarp_contact_jac)
        # one actuator per hinge, no gravcomp: three launches without ordered records (mjwarp_exact_adds)
        assert diag["exact_adds"] == ["qfrc_actuator", "qderiv_actuation", "gravity_force"]
        assert diag["cuda_graph"]["enabled"] is True, diag["cuda_graph"]
        # soaklab's sorts fill mujoco_warp 4.0.0's empty CONTACTS and CONSTRAINT hooks (mjwarp_sorts)
        assert collision_driver._sort_contacts is mjwarp_sorts.sort_contacts
        assert constraint._sort_constraints is mjwarp_sorts.sort_constraints
        backend.reset(np.arange(n), qpos, qvel)
        backend.ctrl_tensor.copy_(torch.linspace(-1, 1, backend.ctrl_tensor.numel(), device="cuda")
                                  .reshape(backend.ctrl_tensor.shape))
        for _ in range(20):
            backend.step()
        states.append(backend.state.clone())
        backend.close()
    assert torch.equal(states[0], states[1])
