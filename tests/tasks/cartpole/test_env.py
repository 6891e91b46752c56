"""The cart-pole swing-up control task on the same batched API."""

from __future__ import annotations

import torch

from soaklab.config.compose import compose
from soaklab.tasks.env import EnvSpec
from soaklab.tasks.registry import make_env


def make(num_envs: int = 8, *overrides: str):
    run = compose("sac", "cartpole_swingup", "mujoco", [f"algo.num_envs={num_envs}", *overrides]).run
    return make_env(run, EnvSpec.of(run))


def test_widths_and_random_policy_return():
    env = make()
    try:
        obs, critic = env.reset()
        assert obs.shape == (8, 5) and critic.shape == (8, 5)
        generator = torch.Generator().manual_seed(0)
        total = torch.zeros(8)
        for _ in range(env.max_episode_steps):
            r = env.step(torch.rand(8, 1, generator=generator) * 2 - 1)
            total += r.reward
            assert set(r.reward_terms) == {"upright", "centered", "control"}
        # Hanging down earns little: a random policy stays far below the 250-step maximum of ~275.
        assert 5 < float(total.mean()) < 60
    finally:
        env.close()


def test_upright_pole_earns_the_most():
    env = make(2)
    try:
        env.reset()
        import numpy as np

        env.backend.reset(np.array([0]), np.array([[0.0, 0.0]]), np.array([[0.0, 0.0]]))
        r = env.step(torch.zeros(2, 1))
        assert float(r.reward_terms["upright"][0]) > 0.99 and float(r.reward_terms["upright"][1]) < 0.05
    finally:
        env.close()


def test_leaving_the_rail_terminates_and_resets():
    env = make(1)
    try:
        env.reset()
        ended = False
        for _ in range(env.max_episode_steps):
            r = env.step(torch.ones(1, 1))
            if r.terminated.any():
                ended = True
                assert abs(float(r.final_obs[0, 2])) > env.cfg.x_limit
                assert abs(float(r.obs[0, 2])) <= env.cfg.noise_position
                break
        assert ended
    finally:
        env.close()


def test_same_seed_is_deterministic():
    def run():
        env = make(4, "env.seed=9")
        try:
            env.reset()
            generator = torch.Generator().manual_seed(2)
            return [env.step(torch.rand(4, 1, generator=generator)).obs.clone() for _ in range(30)]
        finally:
            env.close()

    assert all(torch.equal(a, b) for a, b in zip(run(), run(), strict=True))
