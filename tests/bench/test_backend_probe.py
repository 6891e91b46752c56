"""`soaklab bench backend`: the probe writes its JSON; bad flags fail closed."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from soaklab.bench.backend import solver_counts
from tests.conftest import one_line


def test_probe_writes_phases_and_the_raw_ceiling(cli, g1_assets, tmp_path, monkeypatch):
    """Without the warp extra: the CPU probe asks for no physics variant, so it needs no mujoco_warp
    (an import of a module set to None in sys.modules fails as an absent package's does)."""
    for name in ("mujoco_warp", "warp"):
        monkeypatch.setitem(sys.modules, name, None)
    out = tmp_path / "probe.json"
    result = cli("bench", "backend", "--backends", "mujoco", "--num-envs", "4", "--warmup", "1", "--iters", "3",
                 "--threads", "2", "--assets-manifest", g1_assets.manifest_path, "--output", out)
    assert result.code == 0, result.err
    record = json.loads(out.read_text())
    assert record["schema_version"] == 1 and record["command"].startswith("soaklab bench backend")
    assert record["host"]["cores"] >= 1 and record["versions"]["mujoco"]
    (probe,) = record["results"]
    assert probe["num_envs"] == 4 and probe["threads"] == 2
    assert probe["throughput_env_control_steps_per_s"] > 0 and probe["raw_physics_ceiling_env_steps_per_s"] > 0
    assert set(probe["phases"]) == {"iteration_ms", "action_ms", "physics_ms", "task_ms"}
    assert probe["backend_diagnostics"]["available"] is True
    finite = probe["finite_check"]  # the collector's check on the probe's own steps (G1: 20+ tensors)
    assert finite["iters"] == 3 and finite["tensors_checked"] > 6
    assert finite["step_ms"] > 0 and finite["fused_check_ms"] > 0 and finite["per_tensor_check_ms"] > 0
    assert finite["fused_share_of_step"] == pytest.approx(finite["fused_check_ms"] / finite["step_ms"])


@pytest.mark.parametrize(("flags", "words"), [
    (("--backends", "isaac"), "--backends isaac"),
    pytest.param(("--backends", "mjwarp"), "--backends mjwarp: needs an NVIDIA GPU",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="refused only where there is no GPU")),
    (("--num-envs", "0"), "--num-envs 0"),
    (("--iters", "0"), "--iters 0"),
    (("--torch-threads", "0"), "--torch-threads 0"),
    (("--solver-caps", "10,x"), "--solver-caps 10,x"),
    (("--solver-caps", "0"), "--solver-caps 0"),
    (("--solver-caps", "10"), "--solver-caps: measured on the MJWarp ceiling only"),
    (("--physics-variants", "opt.solver=CG"), "--physics-variants: measured on the MJWarp ceiling only"),
    (("--physics-variants", "opt.solver=CG;opt.no_such_field=1"), "--physics-variants 'opt.no_such_field=1'"),
    (("--physics-variants", "solver=CG"), "--physics-variants 'solver=CG': expected opt.<field>=<value>"),
    (("--physics-variants", "opt.solver="), "--physics-variants 'opt.solver='"),
])
def test_bad_flags_fail_closed(cli, g1_assets, tmp_path, flags, words):
    out = tmp_path / "probe.json"
    args = {"--backends": "mujoco", "--num-envs": "4", "--iters": "2", "--torch-threads": "1"}
    args.update(dict(zip(flags[::2], flags[1::2], strict=True)))
    flat = [x for kv in args.items() for x in kv]
    result = cli("bench", "backend", *flat, "--assets-manifest", g1_assets.manifest_path, "--output", out)
    assert result.code == 2
    assert words in one_line(result.err)
    assert not out.exists()


def test_missing_manifest_fails_closed(cli, tmp_path):
    result = cli("bench", "backend", "--num-envs", "4", "--assets-manifest", tmp_path / "none.json",
                 "--output", tmp_path / "p.json")
    assert result.code == 2 and "soaklab assets pull" in one_line(result.err)


def test_solver_counts_say_how_far_the_slowest_world_sits_from_the_rest():
    # Two steps of four worlds: the loop runs as long as the slowest world needs.
    steps = [torch.tensor([2, 3, 2, 10], dtype=torch.int32), torch.tensor([3, 3, 2, 4], dtype=torch.int32)]
    counts = solver_counts(steps, limit=10)
    assert counts["limit"] == 10 and counts["world_mean"] == pytest.approx(29 / 8)
    assert counts["world_median"] == 3 and counts["slowest_world_max"] == 10
    assert counts["slowest_world_median"] == 4  # torch's median of (10, 4) is the lower one
    assert counts["at_limit_share"] == pytest.approx(1 / 8)


def test_physics_options_apply_to_the_real_step_and_are_put_back(g1_assets):
    """On warp's CPU device: the G1 worlds step under CG with 10 line-search iterations, then the
    options read as before; a value mujoco_warp refuses changes nothing."""
    mjw = pytest.importorskip("mujoco_warp", reason="mujoco_warp is not installed (the warp extra)")
    from soaklab.bench.backend import physics_options
    from soaklab.config.compose import compose
    from soaklab.sim.mjwarp import MjwarpBackend
    from soaklab.tasks.g1_tracking.env import TrackingConfig, build_tracking_model

    cfg = TrackingConfig.from_config(compose("flashsac", "g1_motion_tracking", "mujoco", []).config["task"])
    model, _, _ = build_tracking_model(str(g1_assets.scene), cfg)
    backend = MjwarpBackend(model, num_envs=2, decimation=cfg.decimation, device="cpu")
    opt = backend.m.opt
    before = (opt.solver, opt.ls_iterations, opt.broadphase)
    with physics_options(backend.m, ("opt.solver=CG", "opt.ls_iterations=10")):
        assert (opt.solver, opt.ls_iterations) == (int(mjw.SolverType.CG), 10)
        backend.step_physics_only()
    assert (opt.solver, opt.ls_iterations, opt.broadphase) == before
    assert torch.isfinite(backend.view("qpos")).all()
    with pytest.raises(ValueError, match="SAP_NOPE"), physics_options(backend.m, ("opt.broadphase=SAP_NOPE",)):
        pass
    assert (opt.solver, opt.ls_iterations, opt.broadphase) == before
    backend.close()
