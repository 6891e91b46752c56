"""What SAC and FlashSAC share: the tanh-Gaussian actor head, temperature, targets."""

from __future__ import annotations

import math
from typing import Any, Protocol

import torch
from torch import nn

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class Agent(Protocol):
    device: torch.device

    def act(self, obs: torch.Tensor, env_ids: slice, explore: bool) -> torch.Tensor: ...

    def random_actions(self, count: int) -> torch.Tensor: ...

    def update(self, batch: dict[str, torch.Tensor], step: int) -> dict[str, float]: ...

    def observe_rewards(self, rewards: torch.Tensor, dones: torch.Tensor) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...


def mlp(inp: int, hidden: int, out: int, layers: int) -> nn.Sequential:
    mods: list[nn.Module] = []
    width = inp
    for _ in range(layers):
        mods += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    mods.append(nn.Linear(width, out))
    return nn.Sequential(*mods)


def squash(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """tanh(mean + std * noise) and its log-probability (with the tanh correction)."""
    log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
    pre = mean + log_std.exp() * noise
    action = torch.tanh(pre)
    log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    log_prob = log_prob - (2 * (math.log(2) - pre - nn.functional.softplus(-2 * pre))).sum(-1)
    return action, log_prob


@torch.no_grad()
def polyak(target: nn.Module, source: nn.Module, tau: float) -> None:
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.lerp_(s, tau)
    for t, s in zip(target.buffers(), source.buffers(), strict=True):
        t.copy_(s)


class Temperature(nn.Module):
    """The learned entropy temperature alpha, aiming at entropy -action_dim."""

    def __init__(self, action_dim: int, initial: float = 0.1) -> None:
        super().__init__()
        self.log_alpha = nn.Parameter(torch.tensor(math.log(initial)))
        self.target_entropy = -float(action_dim)

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.exp()

    def loss(self, log_prob: torch.Tensor) -> torch.Tensor:
        return -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()


def make_optimizers(actor: nn.Module, critics: nn.Module, temperature: Temperature,
                    cfg: dict[str, Any]) -> tuple[torch.optim.Optimizer, torch.optim.Optimizer, torch.optim.Optimizer]:
    """Adam for actor, critics and temperature (the temperature follows the actor's rate)."""
    return (torch.optim.Adam(actor.parameters(), lr=float(cfg["actor_lr"])),
            torch.optim.Adam(critics.parameters(), lr=float(cfg["critic_lr"])),
            torch.optim.Adam(temperature.parameters(), lr=float(cfg["actor_lr"])))


def seeded_generator(seed: int, device: torch.device) -> torch.Generator:
    """All of an agent's randomness comes from one generator (lock-step reproducibility)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator
