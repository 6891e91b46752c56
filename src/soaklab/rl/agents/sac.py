"""SAC: twin Q critics (one batched module) with target networks, learned temperature,
tanh-Gaussian actor."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from soaklab.contract.sections import AlgoConfig
from soaklab.rl.agents.common import OffPolicyAgent, Temperature, adam, frozen, polyak, squash
from soaklab.rl.agents.nets import MLP


class SACAgent(OffPolicyAgent):
    diag_names = ("critic", "actor", "alpha", "alpha_value", "q_mean")

    def __init__(self, obs_dim: int, critic_dim: int, action_dim: int, num_envs: int, cfg: AlgoConfig,
                 device: torch.device) -> None:
        super().__init__(obs_dim, critic_dim, action_dim, cfg, device)
        self.gamma, self.tau = cfg.gamma, cfg.tau
        layers = cfg.num_blocks
        self.actor = MLP(1, obs_dim, cfg.actor_hidden, 2 * action_dim, layers, zero_head=True).to(device)
        self.critics = MLP(2, critic_dim + action_dim, cfg.critic_hidden, 1, layers).to(device)
        self.targets = copy.deepcopy(self.critics).requires_grad_(False)
        self.temperature = Temperature(action_dim, initial=cfg.alpha_init).to(device)
        self.actor_opt = adam(self.actor.parameters(), cfg.actor_lr, device)
        self.critic_opt = adam(self.critics.parameters(), cfg.critic_lr, device)
        self.alpha_opt = adam(self.temperature.parameters(), cfg.actor_lr, device)

    def _policy(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.actor(obs)[0].chunk(2, dim=-1)
        noise = torch.randn(mean.shape, generator=self.generator, device=self.device)
        return squash(mean, log_std, noise, self.log_std_bounds)

    def _mean_action(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.actor(obs)[0].chunk(2, dim=-1)[0])

    def _explore(self, obs: torch.Tensor, env_ids: slice) -> torch.Tensor:
        return self._policy(obs)[0]

    def _q(self, nets: MLP, critic_obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return nets(torch.cat([critic_obs, action], dim=-1))[..., 0].transpose(0, 1)  # [B, 2]

    def update_variants(self) -> dict[str, Callable[[], None]]:
        return {"full": self._update}

    def _update(self) -> None:
        batch = self._batch()
        with torch.no_grad():
            next_action, next_log_prob = self._policy(batch["next_obs"])
            target_q = self._q(self.targets, batch["next_critic"], next_action).min(-1).values
            soft = target_q - self.temperature.alpha * next_log_prob
            y = batch["reward"][:, 0] + batch["discount"][:, 0] * (1 - batch["terminated"][:, 0]) * soft
        q = self._q(self.critics, batch["critic"], batch["action"])
        critic_loss = (q - y[:, None]).pow(2).mean()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self._step(self.critic_opt, self.critics)

        action, log_prob = self._policy(batch["obs"])
        with frozen(self.critics):
            q_pi = self._q(self.critics, batch["critic"], action).min(-1).values
        actor_loss = (self.temperature.alpha.detach() * log_prob - q_pi).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self._step(self.actor_opt, self.actor)
        alpha_loss = self.temperature.loss(log_prob)
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self._step(self.alpha_opt, self.temperature)
        polyak(self.targets, self.critics, self.tau)
        self._record(critic=critic_loss, actor=actor_loss, alpha=alpha_loss, alpha_value=self.temperature.alpha,
                     q_mean=q.detach().mean())
