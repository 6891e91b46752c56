"""SAC: twin Q critics with target networks, learned temperature, tanh-Gaussian actor."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from soaklab.rl.agents.common import Temperature, make_optimizers, mlp, polyak, seeded_generator, squash


class SACAgent:
    def __init__(self, obs_dim: int, critic_dim: int, action_dim: int, num_envs: int, cfg: dict[str, Any],
                 device: torch.device) -> None:
        self.device = device
        self.action_dim = action_dim
        self.gamma, self.tau = float(cfg["gamma"]), float(cfg["tau"])
        layers = int(cfg["num_blocks"])
        self.actor = mlp(obs_dim, int(cfg["actor_hidden"]), 2 * action_dim, layers).to(device)
        self.critics = nn.ModuleList(
            [mlp(critic_dim + action_dim, int(cfg["critic_hidden"]), 1, layers) for _ in range(2)]).to(device)
        self.targets = copy.deepcopy(self.critics).requires_grad_(False)
        self.temperature = Temperature(action_dim).to(device)
        self.actor_opt, self.critic_opt, self.alpha_opt = make_optimizers(self.actor, self.critics,
                                                                          self.temperature, cfg)
        self.generator = seeded_generator(int(cfg["seed"]), device)

    def _policy(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.actor(obs).chunk(2, dim=-1)
        noise = torch.randn(mean.shape, generator=self.generator, device=self.device)
        return squash(mean, log_std, noise)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, env_ids: slice, explore: bool = True) -> torch.Tensor:
        if not explore:
            return torch.tanh(self.actor(obs).chunk(2, dim=-1)[0])
        return self._policy(obs)[0]

    def random_actions(self, count: int) -> torch.Tensor:
        return torch.rand(count, self.action_dim, generator=self.generator, device=self.device) * 2 - 1

    def observe_rewards(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        """SAC uses raw rewards."""

    def _q(self, nets: nn.ModuleList, critic_obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([critic_obs, action], dim=-1)
        return torch.cat([net(x) for net in nets], dim=-1)  # [B, 2]

    def update(self, batch: dict[str, torch.Tensor], step: int) -> dict[str, float]:
        with torch.no_grad():
            next_action, next_log_prob = self._policy(batch["next_obs"])
            target_q = self._q(self.targets, batch["next_critic"], next_action).min(-1).values
            soft = target_q - self.temperature.alpha * next_log_prob
            y = batch["reward"][:, 0] + self.gamma * (1 - batch["terminated"][:, 0]) * soft
        q = self._q(self.critics, batch["critic"], batch["action"])
        critic_loss = (q - y[:, None]).pow(2).mean()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        action, log_prob = self._policy(batch["obs"])
        q_pi = self._q(self.critics, batch["critic"], action).min(-1).values
        actor_loss = (self.temperature.alpha.detach() * log_prob - q_pi).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        alpha_loss = self.temperature.loss(log_prob)
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()
        polyak(self.targets, self.critics, self.tau)
        return {"critic": critic_loss.item(), "actor": actor_loss.item(), "alpha": alpha_loss.item(),
                "alpha_value": self.temperature.alpha.item(), "q_mean": q.mean().item()}

    def state_dict(self) -> dict[str, Any]:
        return {"actor": self.actor.state_dict(), "critics": self.critics.state_dict(),
                "targets": self.targets.state_dict(), "temperature": self.temperature.state_dict()}
