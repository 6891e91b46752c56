"""FlashSAC (arXiv 2604.04539): SAC with normalized residual networks and a categorical critic.

- Networks (soaklab.rl.agents.nets): a linear embedding, RMSNorm, `num_blocks` inverted residual blocks
  (expand 4x, BatchNorm, SiLU, project back) and a final RMSNorm; after every
  optimizer step each hidden Linear's weight rows are projected to unit norm.
- Critic: twin categorical critics (one batched module) over `num_bins` atoms on [v_min, v_max],
  trained by cross-entropy to the projected distributional target, with rewards
  scaled by the running spread of the discounted return.
- Exploration noise is held per env for zeta-distributed spans (1..noise_zeta_max).
- The actor is updated every `actor_update_interval` critic updates; autocast
  (bf16) on CUDA learners when use_amp is set.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from soaklab.contract.sections import FlashSACConfig
from soaklab.rl.agents.common import OffPolicyAgent, Temperature, adam, eval_mode, frozen, polyak, squash
from soaklab.rl.agents.nets import ResidualTrunk, project_rows


class ReturnScale:
    """Running spread of per-env discounted returns; rewards are divided by it. Kept on the device
    (float64), updated with tensor ops only: the captured update reads `scale` without a host read."""

    def __init__(self, num_envs: int, gamma: float, v_max: float, device: torch.device) -> None:
        self.gamma, self.v_max = gamma, v_max
        f64 = dict(dtype=torch.float64, device=device)
        self.returns = torch.zeros(num_envs, **f64)
        self.count = torch.zeros((), **f64)
        self.mean = torch.zeros((), **f64)
        self.m2 = torch.zeros((), **f64)
        self.max_abs = torch.zeros((), **f64)
        self.scale = torch.full((), 1e-2, dtype=torch.float32, device=device)

    @torch.no_grad()
    def observe(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        self.returns.mul_(self.gamma).add_(rewards.double())
        values = self.returns
        # Chan's parallel update of the running mean/variance with this vector of returns.
        n = values.numel()
        batch_mean = values.mean()
        batch_m2 = ((values - batch_mean) ** 2).sum()
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean.add_(delta * n / total)
        self.m2.add_(batch_m2 + delta * delta * self.count * n / total)
        self.count.copy_(total)
        torch.maximum(self.max_abs, values.abs().max(), out=self.max_abs)
        self.returns.masked_fill_(dones.bool(), 0.0)
        var = self.m2 / (self.count - 1).clamp_min(1)
        spread = torch.sqrt(var + 1e-8)
        self.scale.copy_(torch.maximum(torch.maximum(spread, self.max_abs / self.v_max),
                                       spread.new_tensor(1e-2)))


class FlashSACAgent(OffPolicyAgent):
    diag_names = ("critic", "reward_scale", "q_mean", "actor", "alpha", "alpha_value")

    def __init__(self, obs_dim: int, critic_dim: int, action_dim: int, num_envs: int, cfg: FlashSACConfig,
                 device: torch.device) -> None:
        super().__init__(obs_dim, critic_dim, action_dim, cfg, device)
        self.gamma, self.tau = cfg.gamma, cfg.tau
        self.actor_interval = cfg.actor_update_interval
        self.use_amp = cfg.use_amp and device.type == "cuda"
        blocks = cfg.num_blocks
        self.actor = ResidualTrunk(1, obs_dim, cfg.actor_hidden, blocks, 2 * action_dim,
                                   zero_head=True).to(device)
        # Both critics are one batched module (members stacked): one kernel per layer for the pair.
        self.critics = ResidualTrunk(2, critic_dim + action_dim, cfg.critic_hidden, blocks,
                                     cfg.num_bins, zero_head=True).to(device)
        # BatchNorm in train mode normalizes each forward over its own batch, which would cancel any
        # batch-wide shift of the policy's actions in the actor loss; the target critics and the actor
        # loss therefore read the critics in eval mode (running statistics), as CrossQ does.
        self.targets = copy.deepcopy(self.critics).requires_grad_(False).eval()
        self.temperature = Temperature(action_dim, initial=cfg.alpha_init).to(device)
        self.v_min, self.v_max, self.num_bins = cfg.v_min, cfg.v_max, cfg.num_bins
        self.support = torch.linspace(self.v_min, self.v_max, self.num_bins, device=device)
        self.actor_opt = adam(self.actor.parameters(), cfg.actor_lr, device)
        self.critic_opt = adam(self.critics.parameters(), cfg.critic_lr, device)
        self.alpha_opt = adam(self.temperature.parameters(), cfg.actor_lr, device)
        self.return_scale = ReturnScale(num_envs, self.gamma, self.v_max, device)
        # Held exploration noise: one draw per env, kept for a zeta-distributed number of steps
        # (drawn by inverse CDF: no host read, capturable).
        spans = torch.arange(1, cfg.noise_zeta_max + 1, dtype=torch.float64, device=device)
        probs = spans ** -cfg.noise_zeta_mu
        self.span_cdf = (probs.cumsum(0) / probs.sum()).float()
        self.span_cdf[-1] = 1.0
        self.noise = torch.zeros(num_envs, action_dim, device=device)
        self.noise_left = torch.zeros(num_envs, dtype=torch.long, device=device)
        project_rows(self.actor.hidden_weights() + self.critics.hidden_weights())
        self.targets.load_state_dict(self.critics.state_dict())

    def _autocast(self) -> Any:
        # cache_enabled=False: autocast's weight cast cache must not outlive a captured region.
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.use_amp, cache_enabled=False)

    def _dist(self, nets: ResidualTrunk, critic_obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([critic_obs, action], dim=-1)
        with self._autocast():
            return nets(x).float().transpose(0, 1)  # [B, 2, bins] logits

    def _q(self, logits: torch.Tensor) -> torch.Tensor:
        return (logits.softmax(-1) * self.support).sum(-1)  # [B, 2]

    def _policy(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        with self._autocast():
            mean, log_std = self.actor(obs)[0].float().chunk(2, dim=-1)
        if noise is None:
            noise = torch.randn(mean.shape, generator=self.generator, device=self.device)
        return squash(mean, log_std, noise, self.log_std_bounds)

    def _mean_action(self, obs: torch.Tensor) -> torch.Tensor:
        with eval_mode(self.actor), self._autocast():
            return torch.tanh(self.actor(obs)[0].float().chunk(2, dim=-1)[0])

    def _explore(self, obs: torch.Tensor, env_ids: slice) -> torch.Tensor:
        """Every env draws a fresh noise and span each step; the expired ones take them."""
        n = obs.shape[0]
        left = self.noise_left[env_ids]
        expired = left <= 0
        fresh = torch.randn(n, self.action_dim, generator=self.generator, device=self.device)
        u = torch.rand(n, generator=self.generator, device=self.device)
        spans = torch.searchsorted(self.span_cdf, u).clamp_max(len(self.span_cdf) - 1) + 1
        noise = torch.where(expired[:, None], fresh, self.noise[env_ids])
        self.noise[env_ids] = noise
        self.noise_left[env_ids] = torch.where(expired, spans, left) - 1
        with eval_mode(self.actor):
            return self._policy(obs, noise)[0]

    def observe_rewards(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        self.return_scale.observe(rewards, dones)

    def _project(self, rewards: torch.Tensor, discount: torch.Tensor, next_probs: torch.Tensor,
                 next_entropy: torch.Tensor) -> torch.Tensor:
        """Project r + discount * (z - alpha log pi) onto the fixed support (C51 projection); the
        discount is gamma^steps of the n-step window, 0 after a termination."""
        z, v_min, v_max = self.support, self.v_min, self.v_max
        delta = (v_max - v_min) / (self.num_bins - 1)
        tz = (rewards[:, None] + discount[:, None] * (z[None, :] + next_entropy[:, None]))
        b = (tz.clamp(v_min, v_max) - v_min) / delta
        lower, upper = b.floor().long(), b.ceil().long()
        same = lower == upper
        target = torch.zeros_like(next_probs)
        target.scatter_add_(1, lower, next_probs * (upper.float() - b + same.float()))
        target.scatter_add_(1, upper, next_probs * (b - lower.float()))
        return target

    def update_variants(self) -> dict[str, Callable[[], None]]:
        return {"critic": lambda: self._update(actor=False), "critic_actor": lambda: self._update(actor=True)}

    def variant(self, step: int) -> str:
        return "critic_actor" if step % self.actor_interval == 0 else "critic"

    def _update(self, actor: bool) -> None:
        batch = self._batch()
        scale = self.return_scale.scale
        rewards = batch["reward"][:, 0] / scale
        with torch.no_grad():
            next_action, next_log_prob = self._policy(batch["next_obs"])
            next_logits = self._dist(self.targets, batch["next_critic"], next_action)
            pick = self._q(next_logits).argmin(-1)  # the pessimistic critic's distribution
            next_probs = next_logits.softmax(-1).gather(1, pick[:, None, None].expand(-1, 1, self.num_bins))[:, 0]
            entropy = -self.temperature.alpha * next_log_prob
            discount = batch["discount"][:, 0] * (1 - batch["terminated"][:, 0])
            target = self._project(rewards, discount, next_probs, entropy)
        logits = self._dist(self.critics, batch["critic"], batch["action"])
        critic_loss = -(target[:, None, :] * logits.log_softmax(-1)).sum(-1).mean()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self._step(self.critic_opt, self.critics)
        self._sync_buffers(self.critics)  # BatchNorm statistics: the same on every rank
        project_rows(self.critics.hidden_weights())
        polyak(self.targets, self.critics, self.tau)
        self._record(critic=critic_loss, reward_scale=scale, q_mean=self._q(logits.detach()).mean())
        if not actor:  # the actor's BatchNorm statistics moved with the target policy's forward
            self._sync_buffers(self.actor)
            return
        action, log_prob = self._policy(batch["obs"])
        with eval_mode(self.critics), frozen(self.critics):
            q_pi = self._q(self._dist(self.critics, batch["critic"], action)).min(-1).values
        actor_loss = (self.temperature.alpha.detach() * log_prob - q_pi).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self._step(self.actor_opt, self.actor)
        self._sync_buffers(self.actor)
        project_rows(self.actor.hidden_weights())
        alpha_loss = self.temperature.loss(log_prob)
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self._step(self.alpha_opt, self.temperature)
        self._record(actor=actor_loss, alpha=alpha_loss, alpha_value=self.temperature.alpha)
