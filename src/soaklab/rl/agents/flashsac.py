"""FlashSAC (arXiv 2604.04539): SAC with normalized residual networks and a categorical critic.

- Networks: a linear embedding, RMSNorm, `num_blocks` inverted residual blocks
  (expand 4x, BatchNorm, SiLU, project back) and a final RMSNorm; after every
  optimizer step each hidden Linear's weight rows are projected to unit norm.
- Critic: twin categorical critics over `num_bins` atoms on [v_min, v_max],
  trained by cross-entropy to the projected distributional target, with rewards
  scaled by the running spread of the discounted return.
- Exploration noise is held per env for zeta-distributed spans (1..noise_zeta_max).
- The actor is updated every `actor_update_interval` critic updates; autocast
  (bf16) on CUDA learners when use_amp is set.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import nn

from soaklab.rl.agents.common import Temperature, make_optimizers, polyak, seeded_generator, squash

EXPANSION = 4


class InvertedResidual(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.expand = nn.Linear(width, EXPANSION * width)
        self.norm = nn.BatchNorm1d(EXPANSION * width)
        self.project = nn.Linear(EXPANSION * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.project(nn.functional.silu(self.norm(self.expand(x))))


class Trunk(nn.Module):
    def __init__(self, inp: int, width: int, blocks: int, out: int, zero_head: bool = False) -> None:
        super().__init__()
        self.embed = nn.Linear(inp, width)
        self.norm_in = nn.RMSNorm(width)
        self.blocks = nn.Sequential(*[InvertedResidual(width) for _ in range(blocks)])
        self.norm_out = nn.RMSNorm(width)
        self.head = nn.Linear(width, out)
        if zero_head:
            # A categorical critic starts uniform over its symmetric support, i.e. at Q = 0: a random
            # head starts Q at an arbitrary value, and a negative one makes early termination look
            # better than staying alive until the critic has unlearned it.
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm_out(self.blocks(self.norm_in(self.embed(x)))))

    @torch.no_grad()
    def project_weights(self) -> None:
        """Project each hidden Linear's weight rows onto the unit sphere (the head stays free)."""
        for module in [self.embed, *[m for b in self.blocks for m in (b.expand, b.project)]]:
            module.weight.div_(module.weight.norm(dim=1, keepdim=True).clamp_min(1e-6))


class ReturnScale:
    """Running spread of per-env discounted returns; rewards are divided by it."""

    def __init__(self, num_envs: int, gamma: float, v_max: float, device: torch.device) -> None:
        self.gamma, self.v_max = gamma, v_max
        self.returns = torch.zeros(num_envs, dtype=torch.float64, device=device)
        self.count, self.mean, self.m2 = 0, 0.0, 0.0
        self.max_abs = 0.0

    def observe(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        self.returns = self.returns * self.gamma + rewards.double()
        values = self.returns
        # Chan's parallel update of the running mean/variance with this vector of returns.
        n, mean, m2 = values.numel(), float(values.mean()), float(((values - values.mean()) ** 2).sum())
        total = self.count + n
        delta = mean - self.mean
        self.mean += delta * n / total
        self.m2 += m2 + delta * delta * self.count * n / total
        self.count = total
        self.max_abs = max(self.max_abs, float(values.abs().max()))
        self.returns = torch.where(dones.bool(), torch.zeros_like(self.returns), self.returns)

    @property
    def scale(self) -> float:
        var = self.m2 / max(self.count - 1, 1)
        return max(math.sqrt(var + 1e-8), self.max_abs / self.v_max, 1e-2)


class FlashSACAgent:
    def __init__(self, obs_dim: int, critic_dim: int, action_dim: int, num_envs: int, cfg: dict[str, Any],
                 device: torch.device) -> None:
        self.device = device
        self.action_dim = action_dim
        self.gamma, self.tau = float(cfg["gamma"]), float(cfg["tau"])
        self.actor_interval = int(cfg["actor_update_interval"])
        self.use_amp = bool(cfg["use_amp"]) and device.type == "cuda"
        blocks = int(cfg["num_blocks"])
        self.actor = Trunk(obs_dim, int(cfg["actor_hidden"]), blocks, 2 * action_dim).to(device)
        self.critics = nn.ModuleList(
            [Trunk(critic_dim + action_dim, int(cfg["critic_hidden"]), blocks, int(cfg["num_bins"]),
                   zero_head=True) for _ in range(2)]).to(device)
        # BatchNorm in train mode normalizes each forward over its own batch, which would cancel any
        # batch-wide shift of the policy's actions in the actor loss; the target critics and the actor
        # loss therefore read the critics in eval mode (running statistics), as CrossQ does.
        self.targets = copy.deepcopy(self.critics).requires_grad_(False).eval()
        # Rewards are scaled down by the return spread, so the entropy bonus starts small too.
        self.temperature = Temperature(action_dim, initial=0.01).to(device)
        self.support = torch.linspace(float(cfg["v_min"]), float(cfg["v_max"]), int(cfg["num_bins"]), device=device)
        self.actor_opt, self.critic_opt, self.alpha_opt = make_optimizers(self.actor, self.critics,
                                                                          self.temperature, cfg)
        self.generator = seeded_generator(int(cfg["seed"]), device)
        self.return_scale = ReturnScale(num_envs, self.gamma, float(cfg["v_max"]), device)
        # Held exploration noise: one draw per env, kept for a zeta-distributed number of steps.
        spans = torch.arange(1, int(cfg["noise_zeta_max"]) + 1, dtype=torch.float64, device=device)
        self.span_probs = (spans ** -float(cfg["noise_zeta_mu"])) / (spans ** -float(cfg["noise_zeta_mu"])).sum()
        self.noise = torch.zeros(num_envs, action_dim, device=device)
        self.noise_left = torch.zeros(num_envs, dtype=torch.long, device=device)
        for m in (self.actor, *self.critics):
            m.project_weights()
        self.targets.load_state_dict(self.critics.state_dict())

    def _autocast(self):
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.use_amp)

    def _dist(self, nets: nn.ModuleList, critic_obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([critic_obs, action], dim=-1)
        with self._autocast():
            return torch.stack([net(x) for net in nets], dim=1).float()  # [B, 2, bins] logits

    def _q(self, logits: torch.Tensor) -> torch.Tensor:
        return (logits.softmax(-1) * self.support).sum(-1)  # [B, 2]

    def _policy(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        with self._autocast():
            mean, log_std = self.actor(obs).float().chunk(2, dim=-1)
        if noise is None:
            noise = torch.randn(mean.shape, generator=self.generator, device=self.device)
        return squash(mean, log_std, noise)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, env_ids: slice, explore: bool = True) -> torch.Tensor:
        self.actor.eval()
        try:
            if not explore:
                with self._autocast():
                    return torch.tanh(self.actor(obs).float().chunk(2, dim=-1)[0])
            left = self.noise_left[env_ids]
            expired = left <= 0
            count = int(expired.sum())
            if count:
                fresh = torch.randn(count, self.action_dim, generator=self.generator, device=self.device)
                spans = torch.multinomial(self.span_probs, count, replacement=True, generator=self.generator) + 1
                noise = self.noise[env_ids]
                noise[expired] = fresh
                left[expired] = spans
                self.noise[env_ids] = noise
            self.noise_left[env_ids] = left - 1
            return self._policy(obs, self.noise[env_ids])[0]
        finally:
            self.actor.train()

    def random_actions(self, count: int) -> torch.Tensor:
        return torch.rand(count, self.action_dim, generator=self.generator, device=self.device) * 2 - 1

    def observe_rewards(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        self.return_scale.observe(rewards, dones)

    def _project(self, rewards: torch.Tensor, not_done: torch.Tensor, next_probs: torch.Tensor,
                 next_entropy: torch.Tensor) -> torch.Tensor:
        """Project r + gamma * (z - alpha log pi) onto the fixed support (C51 projection)."""
        z = self.support
        v_min, v_max = float(z[0]), float(z[-1])
        delta = (v_max - v_min) / (len(z) - 1)
        tz = (rewards[:, None] + self.gamma * not_done[:, None] * (z[None, :] + next_entropy[:, None]))
        b = (tz.clamp(v_min, v_max) - v_min) / delta
        lower, upper = b.floor().long(), b.ceil().long()
        same = lower == upper
        target = torch.zeros_like(next_probs)
        target.scatter_add_(1, lower, next_probs * (upper.float() - b + same.float()))
        target.scatter_add_(1, upper, next_probs * (b - lower.float()))
        return target

    def update(self, batch: dict[str, torch.Tensor], step: int) -> dict[str, float]:
        scale = self.return_scale.scale
        rewards = batch["reward"][:, 0] / scale
        with torch.no_grad():
            next_action, next_log_prob = self._policy(batch["next_obs"])
            next_logits = self._dist(self.targets, batch["next_critic"], next_action)
            pick = self._q(next_logits).argmin(-1)  # the pessimistic critic's distribution
            next_probs = next_logits.softmax(-1)[torch.arange(len(pick), device=self.device), pick]
            entropy = -self.temperature.alpha * next_log_prob
            target = self._project(rewards, 1 - batch["terminated"][:, 0], next_probs, entropy)
        logits = self._dist(self.critics, batch["critic"], batch["action"])
        critic_loss = -(target[:, None, :] * logits.log_softmax(-1)).sum(-1).mean()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        for net in self.critics:
            net.project_weights()
        polyak(self.targets, self.critics, self.tau)
        out = {"critic": critic_loss.item(), "reward_scale": scale, "q_mean": self._q(logits.detach()).mean().item()}
        if step % self.actor_interval == 0:
            action, log_prob = self._policy(batch["obs"])
            self.critics.eval()
            try:
                q_pi = self._q(self._dist(self.critics, batch["critic"], action)).min(-1).values
            finally:
                self.critics.train()
            actor_loss = (self.temperature.alpha.detach() * log_prob - q_pi).mean()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            self.actor.project_weights()
            alpha_loss = self.temperature.loss(log_prob)
            self.alpha_opt.zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.alpha_opt.step()
            out |= {"actor": actor_loss.item(), "alpha": alpha_loss.item(),
                    "alpha_value": self.temperature.alpha.item()}
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"actor": self.actor.state_dict(), "critics": self.critics.state_dict(),
                "targets": self.targets.state_dict(), "temperature": self.temperature.state_dict()}
