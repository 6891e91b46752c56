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
