"""Agent internals that must hold on every device: device-side scalars, foreach target updates,
held exploration noise, the update variants and the diagnostics buffer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from soaklab.config.compose import compose
from soaklab.contract.layout import Layout, TaskSpaces
from soaklab.rl.agents import make_agent
from soaklab.rl.agents.common import frozen, polyak
from soaklab.rl.agents.flashsac import ReturnScale
from soaklab.rl.agents.nets import ResidualTrunk
from soaklab.rl.replay import ReplayRing

OBS, CRITIC, ACTION = 6, 9, 3


def small_agent(algo: str, num_envs: int = 4, **extra: object):
    overrides = ["algo.actor_hidden=16", "algo.critic_hidden=16", "algo.num_blocks=1", "algo.batch_size=8",
                 *(f"algo.{k}={v}" for k, v in extra.items())]
    cfg = compose(algo, "cartpole_swingup", "mujoco", overrides).run.algo
    agent = make_agent(algo, OBS, CRITIC, ACTION, num_envs, cfg, torch.device("cpu"))
    layout = Layout(spaces=TaskSpaces(OBS, CRITIC, ACTION), num_envs=num_envs, capacity=1, depth=1,
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


def test_obs_normalizer_matches_torch_statistics_and_feeds_every_network_input():
    from soaklab.rl.agents.common import ObsNormalizer

    norm = ObsNormalizer(3)
    generator = torch.Generator().manual_seed(0)
    chunks = [torch.randn(50, 3, generator=generator) * torch.tensor([1.0, 10.0, 0.1]) + 5 for _ in range(4)]
    for chunk in chunks:
        norm.update(chunk)
    data = torch.cat(chunks)
    torch.testing.assert_close(norm.mean, data.double().mean(0))
    torch.testing.assert_close(norm(data).std(0), torch.ones(3), rtol=1e-3, atol=1e-3)
    constant = ObsNormalizer(2)
    constant.update(torch.ones(10, 2))
    assert torch.isfinite(constant(torch.ones(3, 2))).all()  # zero spread: centred, not divided by 0
    # The agent's update normalises the batch it samples with statistics that took that batch in.
    agent = small_agent("sac")
    agent.update(0)
    assert agent.obs_norm.count == 8 and agent.critic_norm.count == 8
    assert set(agent.state_dict()) >= {"actor", "critics", "obs_norm", "critic_norm"}


def test_actor_starts_at_zero_mean_with_the_middle_log_std():
    from soaklab.rl.agents.common import log_std_of

    for algo in ("sac", "flashsac"):
        agent = small_agent(algo, log_std_min=-5.0, log_std_max=0.0)
        obs = torch.randn(4, OBS)
        assert torch.equal(agent.act(obs, slice(0, 4), explore=False), torch.zeros(4, ACTION))
        explored = agent.act(obs, slice(0, 4), explore=True)
        assert explored.abs().max() < 0.5  # std e^-2.5 ~ 0.08: near the mean, not uniform over [-1, 1]
    raw = torch.tensor([-100.0, 0.0, 100.0])
    torch.testing.assert_close(log_std_of(raw, (-5.0, 0.0)), torch.tensor([-5.0, -2.5, 0.0]))

