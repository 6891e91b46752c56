"""Agent internals that must hold on every device: device-side scalars, foreach target updates,
held exploration noise, the update variants and the diagnostics buffer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from soaklab.config.compose import compose
from soaklab.rl.agents import make_agent
from soaklab.rl.agents.common import frozen, polyak
from soaklab.rl.agents.flashsac import ReturnScale
from soaklab.rl.agents.nets import ResidualTrunk
from soaklab.rl.channels import Layout
from soaklab.rl.replay import ReplayRing

OBS, CRITIC, ACTION = 6, 9, 3


def small_agent(algo: str, num_envs: int = 4, **extra: object):
    overrides = ["algo.actor_hidden=16", "algo.critic_hidden=16", "algo.num_blocks=1", "algo.batch_size=8",
                 *(f"algo.{k}={v}" for k, v in extra.items())]
    cfg = compose(algo, "cartpole_swingup", "mujoco", overrides).config["algo"]
    agent = make_agent(algo, OBS, CRITIC, ACTION, num_envs, cfg, torch.device("cpu"))
    layout = Layout(num_envs=num_envs, capacity=1, obs_dim=OBS, critic_dim=CRITIC, action_dim=ACTION, depth=1,
                    slot_rows=num_envs, num_metrics=1)
    replay = ReplayRing(64, layout.row_width, layout.row_slices(), torch.device("cpu"), seed=0)
    replay.add(torch.rand(32, layout.row_width))
    agent.bind(replay, 8)
    return agent


def test_polyak_moves_parameters_and_copies_buffers():
    torch.manual_seed(0)
    source, target = ResidualTrunk(2, 4, 8, 1, 3), ResidualTrunk(2, 4, 8, 1, 3)
    source(torch.randn(16, 4))  # train-mode forward: running statistics move
    before = [p.clone() for p in target.parameters()]
    polyak(target, source, 0.25)
    for old, new, src in zip(before, target.parameters(), source.parameters(), strict=True):
        torch.testing.assert_close(new, old + 0.25 * (src - old))
    for t, s in zip(target.buffers(), source.buffers(), strict=True):
        assert torch.equal(t, s)


def test_return_scale_matches_a_float64_reference():
    gen = np.random.default_rng(0)
    scale = ReturnScale(5, 0.9, 5.0, torch.device("cpu"))
    returns, values_seen = np.zeros(5), []
    for _ in range(30):
        rewards, dones = gen.normal(size=5), gen.random(5) < 0.2
        scale.observe(torch.tensor(rewards, dtype=torch.float32), torch.tensor(dones))
        returns = returns * 0.9 + torch.tensor(rewards, dtype=torch.float32).double().numpy()
        values_seen.extend(returns)
        returns[dones] = 0.0
    seen = np.array(values_seen)
    expected = max(np.sqrt(seen.var(ddof=1) + 1e-8), np.abs(seen).max() / 5.0, 1e-2)
    assert scale.scale.item() == pytest.approx(expected, rel=1e-5)


def test_held_noise_keeps_each_env_draw_for_its_span():
    agent = small_agent("flashsac", num_envs=64)
    obs = torch.randn(64, OBS)
    agent.act(obs, slice(0, 64))
    first_noise, left = agent.noise.clone(), agent.noise_left.clone()
    assert int(left.min()) >= 0 and int(left.max()) <= 15  # spans 1..noise_zeta_max (16), minus this step
    agent.act(obs, slice(0, 64))
    held = left > 0
    assert held.any() and (~held).any()
    assert torch.equal(agent.noise[held], first_noise[held])  # still inside their span
    assert not torch.equal(agent.noise[~held], first_noise[~held])  # expired: a fresh draw


def test_flashsac_updates_the_actor_every_interval_and_fills_its_diagnostics():
    agent = small_agent("flashsac", actor_update_interval=2)
    assert [agent.variant(step) for step in range(4)] == ["critic_actor", "critic", "critic_actor", "critic"]
    agent.update(1)  # critic only: the actor's scalars are not written yet
    values = dict(zip(agent.diag_names, agent.diagnostics.tolist(), strict=True))
    assert np.isfinite(values["critic"]) and np.isnan(values["actor"])
    actor_before = [p.clone() for p in agent.actor.parameters()]
    agent.update(2)
    assert torch.isfinite(agent.diagnostics).all()
    assert any(not torch.equal(a, b) for a, b in zip(actor_before, agent.actor.parameters(), strict=True))
    diag = agent.capture_diagnostics()
    assert diag["enabled"] is False and set(diag["steps"]) >= {"update_critic", "update_critic_actor"}


def test_frozen_critics_pass_gradients_to_the_action_only():
    """The actor loss differentiates through the critics with respect to the action alone."""
    critics = ResidualTrunk(2, 4, 8, 1, 1)
    action = torch.randn(5, 4, requires_grad=True)
    with frozen(critics):
        critics(action).sum().backward()
    assert action.grad is not None and all(p.grad is None for p in critics.parameters())
    assert all(p.requires_grad for p in critics.parameters())  # restored after


def test_sac_update_fills_its_diagnostics():
    agent = small_agent("sac")
    assert torch.isnan(agent.diagnostics).all()
    agent.update(0)
    assert torch.isfinite(agent.diagnostics).all()


def test_replay_samples_only_rows_present():
    layout = Layout(num_envs=4, capacity=1, obs_dim=1, critic_dim=1, action_dim=1, depth=1, slot_rows=4,
                    num_metrics=1)
    ring = ReplayRing(100, layout.row_width, layout.row_slices(), torch.device("cpu"), seed=0)
    rows = torch.arange(10, dtype=torch.float32)[:, None].expand(10, layout.row_width).clone()
    ring.add(rows)
    assert int(ring.size_t) == ring.size == 10
    seen = ring.sample(5000)["obs"][:, 0]
    assert set(seen.long().tolist()) == set(range(10))  # uniform over the present rows, none beyond
