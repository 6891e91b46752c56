"""Ensemble networks: `n` members evaluated as one batched module.

Every layer keeps its members' parameters stacked along a leading axis and runs
them with one batched kernel (`baddbmm`), so the twin critics cost the kernel
launches of one critic. Activations are [n, B, width]. An actor is an ensemble
of one. Each member is initialised as its single-network counterpart would be
(nn.Linear's default init), so the ensemble is the same model family.
"""

from __future__ import annotations

import math

import torch
from torch import nn

EXPANSION = 4  # FlashSAC's inverted residual blocks widen by 4x


class EnsembleLinear(nn.Module):
    def __init__(self, members: int, inp: int, out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(members, out, inp))
        self.bias = nn.Parameter(torch.empty(members, out))
        bound = 1.0 / math.sqrt(inp)
        with torch.no_grad():
            for w in self.weight:  # nn.Linear's init, member by member
                nn.init.kaiming_uniform_(w, a=math.sqrt(5))
            self.bias.uniform_(-bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias[:, None, :], x, self.weight.transpose(1, 2))


class EnsembleRMSNorm(nn.Module):
    def __init__(self, members: int, width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(members, 1, width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class EnsembleBatchNorm(nn.Module):
    """BatchNorm1d per member (statistics over the batch axis), momentum 0.1 like torch's."""

    def __init__(self, members: int, width: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(members, 1, width))
        self.bias = nn.Parameter(torch.zeros(members, 1, width))
        self.register_buffer("running_mean", torch.zeros(members, 1, width))
        self.register_buffer("running_var", torch.ones(members, 1, width))
        self.eps, self.momentum = eps, momentum

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            var, mean = torch.var_mean(x, dim=1, keepdim=True, correction=0)
            with torch.no_grad():
                n = x.shape[1]
                self.running_mean.lerp_(mean.to(self.running_mean.dtype), self.momentum)
                self.running_var.lerp_((var * n / max(n - 1, 1)).to(self.running_var.dtype), self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias


class InvertedResidual(nn.Module):
    def __init__(self, members: int, width: int) -> None:
        super().__init__()
        self.expand = EnsembleLinear(members, width, EXPANSION * width)
        self.norm = EnsembleBatchNorm(members, EXPANSION * width)
        self.project = EnsembleLinear(members, EXPANSION * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.project(nn.functional.silu(self.norm(self.expand(x))))


class ResidualTrunk(nn.Module):
    """FlashSAC's network: embed, RMSNorm, inverted residual blocks, RMSNorm, head."""

    def __init__(self, members: int, inp: int, width: int, blocks: int, out: int, zero_head: bool = False) -> None:
        super().__init__()
        self.members = members
        self.embed = EnsembleLinear(members, inp, width)
        self.norm_in = EnsembleRMSNorm(members, width)
        self.blocks = nn.Sequential(*[InvertedResidual(members, width) for _ in range(blocks)])
        self.norm_out = EnsembleRMSNorm(members, width)
        self.head = EnsembleLinear(members, width, out)
        if zero_head:
            # A categorical critic starts uniform over its symmetric support, i.e. at Q = 0: a random
            # head starts Q at an arbitrary value, and a negative one makes early termination look
            # better than staying alive until the critic has unlearned it. An actor starts at mean 0
            # with its log-std at the middle of its range.
            zero_init(self.head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, inp] (shared by every member) or [n, B, inp] -> [n, B, out]."""
        if x.dim() == 2:
            x = x.expand(self.members, *x.shape)
        return self.head(self.norm_out(self.blocks(self.norm_in(self.embed(x)))))

    def hidden_weights(self) -> list[torch.Tensor]:
        """The weights FlashSAC keeps on the unit sphere (the head stays free)."""
        return [self.embed.weight, *[m.weight for b in self.blocks for m in (b.expand, b.project)]]


def zero_init(layer: nn.Module) -> None:
    nn.init.zeros_(layer.weight)
    nn.init.zeros_(layer.bias)


class MLP(nn.Module):
    """SAC's network: `layers` hidden ReLU layers, then a linear head."""

    def __init__(self, members: int, inp: int, hidden: int, out: int, layers: int, zero_head: bool = False) -> None:
        super().__init__()
        self.members = members
        widths = [inp] + [hidden] * layers
        self.hidden = nn.ModuleList([EnsembleLinear(members, a, b) for a, b in zip(widths[:-1], widths[1:],
                                                                                   strict=True)])
        self.head = EnsembleLinear(members, widths[-1], out)
        if zero_head:
            zero_init(self.head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.expand(self.members, *x.shape)
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.head(x)


@torch.no_grad()
def project_rows(weights: list[torch.Tensor]) -> None:
    """Project each weight row (one output unit's incoming weights) onto the unit sphere, as
    foreach ops: a handful of kernels for the whole list instead of three per layer."""
    norms = [w.norm(dim=-1, keepdim=True) for w in weights]
    torch._foreach_clamp_min_(norms, 1e-6)
    torch._foreach_div_(weights, norms)
