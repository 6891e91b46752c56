"""The compiled task terms compute what the eager ones do (the same function, fused by Inductor)."""

from __future__ import annotations

import torch


def test_compiled_terms_match_eager(make_g1):
    env = make_g1(4, compile_terms=True)
    env.reset()
    generator = torch.Generator().manual_seed(4)
    for _ in range(3):
        env.step(torch.rand(4, 29, generator=generator) * 2 - 1)
    actions = torch.rand(4, 29, generator=generator) * 2 - 1
    compiled = env._step_terms(env.frame, actions, env.last_action)
    eager = env.step_terms(env.frame, actions, env.last_action)
    for i in (0, 1):  # reward terms, tracking errors
        assert set(compiled[i]) == set(eager[i])
        for name in compiled[i]:
            torch.testing.assert_close(compiled[i][name], eager[i][name], rtol=1e-4, atol=1e-6)
    assert torch.equal(compiled[2], eager[2])
    torch.testing.assert_close(compiled[3], eager[3], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(compiled[4], eager[4], rtol=1e-4, atol=1e-5)
    assert env.compiled and env._step_terms is not env.step_terms


def test_the_device_steps_compiled_observations_match_eager(make_g1):
    """MJWarp (warp's CPU device here): the observations after a masked reset, compiled with the
    terms, are the eager function's, for reset and running envs alike."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("mujoco_warp") is None:
        pytest.skip("mujoco_warp is not installed (the warp extra)")
    env = make_g1(4, compile_terms=True, sim="mjwarp")
    device_step = env._device
    assert device_step._observations is not device_step._observations_after_reset
    env.reset()
    generator = torch.Generator().manual_seed(5)
    for _ in range(3):
        env.step(torch.rand(4, 29, generator=generator) * 2 - 1)
    done = torch.tensor([True, False, True, False])[:, None]
    final_obs, final_critic = torch.randn_like(device_step.obs), torch.randn_like(device_step.critic)
    compiled = device_step._observations(done, final_obs, final_critic)
    eager = device_step._observations_after_reset(done, final_obs, final_critic)
    for c, e, final in zip(compiled, eager, (final_obs, final_critic), strict=True):
        torch.testing.assert_close(c, e, rtol=1e-4, atol=1e-5)
        assert torch.equal(c[1], final[1]) and not torch.equal(c[0], final[0])
