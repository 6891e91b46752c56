"""G1 motion tracking on MJWarp (GPU): terms on the device, no host sync, same observations as MuJoCo."""

from __future__ import annotations

import json

import pytest
import torch

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU (CUDA)", allow_module_level=True)
pytest.importorskip("mujoco_warp", reason="mujoco_warp is not installed (the warp extra)")

from soaklab.config.compose import compose  # noqa: E402
from soaklab.gpu.capture import WARMUP_CALLS  # noqa: E402
from soaklab.tasks.env import EnvSpec  # noqa: E402
from soaklab.tasks.registry import make_env  # noqa: E402

# Observations of the same seed on both backends after reset and 3 control steps (H200, 2026-11-29):
# max |diff| 6.7e-8 at reset, at most 6.1e-5 over the 3 steps; the bound leaves ~16x margin.
OBS_TOL = 1e-3


@pytest.fixture
def build(g1_assets):
    made = []

    def env(sim: str, num_envs: int, *overrides: str):
        config = compose("flashsac", "g1_motion_tracking", sim,
                         [f"algo.num_envs={num_envs}", f"env.motion={json.dumps(str(g1_assets.motion))}",
                          *overrides]).run
        e = make_env(config, EnvSpec.of(config, "cuda"), g1_assets.scene, compile_terms=False)
        made.append(e)
        return e

    yield env
    for e in made:
        e.close()


@pytest.mark.parametrize("library", [False, True])
def test_steady_state_steps_and_resets_never_synchronise_the_host(build, g1_assets, library):
    """One clip, and a motion library as one world set (largebox and crawl_slope, each world on its own
    clip's ground): one physics graph and the task's graphs per step, no host sync, resets included."""
    env = library_world_set(g1_assets, 256) if library else build("mjwarp", 256)
    try:
        env.reset()
        zeros = torch.zeros(256, 29, device="cuda")
        for _ in range(WARMUP_CALLS + 1):  # warm-up: lazy allocations, then the task steps' capture
            env.step(zeros)
        torch.cuda.synchronize()
        dones = torch.zeros((), device="cuda")
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(40):  # zero actions fall within ~17 steps: resets happen in here
                r = env.step(zeros)
                dones += r.done.sum()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert int(dones) > 0, "the window must include resets"
        assert torch.isfinite(r.obs).all() and torch.isfinite(r.reward).all()
        assert env.backend.overflow_worlds() == 0
        assert env.diagnostics()["diagnostics"]["cuda_graph"]["enabled"] is True
        assert env.diagnostics()["diagnostics"]["task_cuda_graph"]["enabled"] is True
        assert [label for label, _ in r.clips] == (["largebox", "crawl_slope"] if library else [])
    finally:
        if library:  # the fixture closes what it built
            env.close()


def library_world_set(g1_assets, num_envs: int):
    from soaklab.assets.record import assets_record, resolved_motion, scene_for_env

    record = assets_record(g1_assets.manifest_path)
    motion = resolved_motion(record, ["largebox", "crawl_slope"])
    config = compose("flashsac", "g1_motion_tracking", "mjwarp",
                     [f"algo.num_envs={num_envs}", f"env.motion={json.dumps(motion)}"]).run
    return make_env(config, EnvSpec.of(config, "cuda"), scene_for_env(record, motion), compile_terms=False)


def test_same_seed_same_observations_as_mujoco(build):
    n = 16
    gpu, cpu = build("mjwarp", n), build("mujoco", n)
    obs_gpu, _ = gpu.reset()
    obs_cpu, _ = cpu.reset()
    gaps = [float((obs_gpu - obs_cpu).abs().max())]
    zeros = torch.zeros(n, 29, device="cuda")
    for _ in range(WARMUP_CALLS + 3):  # eager warm-up steps, then captured ones
        rg, rc = gpu.step(zeros), cpu.step(zeros)
        live = ~(rg.done | rc.done)
        gaps.append(float((rg.obs[live] - rc.obs[live]).abs().max()))
    print(f"max |obs mjwarp - obs mujoco| at reset and after each control step: {gaps}")
    assert max(gaps) < OBS_TOL, gaps
