"""What SAC and FlashSAC share: the tanh-Gaussian head, temperature, targets, and the
captured update/inference machinery (`OffPolicyAgent`).

An update reads only static tensors: the replay storage (sampled inside the
update from a device-side row count), parameters, optimizer state and a few
device scalars (temperature, return scale). Its losses and diagnostics land in
`agent.diagnostics`, a device buffer the learner reads once per logging
interval, never per update. On CUDA each update variant and each inference
group is one CUDA graph (soaklab.gpu.capture); on the CPU the same functions run
eagerly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from soaklab.contract.sections import AlgoConfig
from soaklab.gpu.capture import CapturedStep, graph_diagnostics, graph_requested
from soaklab.rl.agents.compiled import Compilation
from soaklab.rl.replay import ReplayRing

if TYPE_CHECKING:
    from soaklab.rl.dp import DataParallel


def log_std_of(raw: torch.Tensor, bounds: tuple[float, float]) -> torch.Tensor:
    """The actor's log-std head mapped smoothly into [lo, hi] (tanh, not a clamp: the gradient never
    dies at a bound). A zero-initialised head starts at the midpoint, e.g. std e^-2.5 ~ 0.08 for
    (-5, 0): the first episodes act near the mean, not at random."""
    lo, hi = bounds
    return lo + 0.5 * (hi - lo) * (torch.tanh(raw) + 1)


def squash(mean: torch.Tensor, raw_log_std: torch.Tensor, noise: torch.Tensor, bounds: tuple[float, float]
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """tanh(mean + std * noise) and its log-probability (with the tanh correction)."""
    log_std = log_std_of(raw_log_std, bounds)
    pre = mean + log_std.exp() * noise
    action = torch.tanh(pre)
    log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    log_prob = log_prob - (2 * (math.log(2) - pre - nn.functional.softplus(-2 * pre))).sum(-1)
    return action, log_prob


@torch.no_grad()
def polyak(target: nn.Module, source: nn.Module, tau: float) -> None:
    """target <- (1 - tau) target + tau source for parameters, a copy for buffers: two foreach ops."""
    torch._foreach_lerp_(list(target.parameters()), list(source.parameters()), tau)
    buffers = list(target.buffers())
    if buffers:  # BatchNorm statistics (FlashSAC); SAC's networks have none
        torch._foreach_copy_(buffers, list(source.buffers()))


@contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """No weight gradients for `module` inside (the actor loss differentiates through the critics
    only with respect to the action)."""
    params = list(module.parameters())
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[None]:
    module.eval()
    try:
        yield
    finally:
        module.train()


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


def adam(params: Any, lr: float, device: torch.device) -> torch.optim.Optimizer:
    """Adam; on CUDA the fused kernel (one launch for all parameters, step counts kept on the
    device, so a CUDA graph can capture it)."""
    if device.type == "cuda":
        return torch.optim.Adam(params, lr=lr, fused=True, capturable=True)
    return torch.optim.Adam(params, lr=lr)


class ObsNormalizer(nn.Module):
    """Running mean and variance of an observation vector (Chan's parallel update, float64
    statistics); `forward` standardises and clips to +-CLIP. Updated in place from the sampled
    batches inside the update, so the captured update keeps it current without a host read."""

    CLIP = 10.0

    def __init__(self, dim: int, enabled: bool = True) -> None:
        super().__init__()
        self.enabled = enabled
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("m2", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("scale", torch.ones(dim))  # 1 / std, as float32 for the forward
        self.register_buffer("shift", torch.zeros(dim))

    @torch.no_grad()
    def update(self, x: torch.Tensor, dp: DataParallel | None = None) -> None:
        """Take in a batch; with data parallelism, the batch of every rank (their moments summed),
        so all ranks keep the same statistics."""
        if not self.enabled:
            return
        x = x.double()
        if dp is None:
            n: float | torch.Tensor = x.shape[0]
            batch_mean = x.mean(0)
            batch_m2 = ((x - batch_mean) ** 2).sum(0)
        else:
            dim = x.shape[1]
            moments = torch.cat([x.new_full((1,), x.shape[0]), x.sum(0), (x * x).sum(0)])
            dp.sum_(moments)
            n, batch_mean = moments[0], moments[1:1 + dim] / moments[0]
            batch_m2 = (moments[1 + dim:] - n * batch_mean * batch_mean).clamp_min(0)
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean.add_(delta * n / total)
        self.m2.add_(batch_m2 + delta * delta * self.count * n / total)
        self.count.copy_(total)
        std = (self.m2 / (self.count - 1).clamp_min(1)).sqrt()
        # Constant features (a zero std) pass through centred instead of blowing up.
        self.scale.copy_(torch.where(std > 1e-6, 1.0 / std.clamp_min(1e-6), torch.ones_like(std)).float())
        self.shift.copy_(self.mean.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return x
        return ((x - self.shift) * self.scale).clamp(-self.CLIP, self.CLIP)


def seeded_generator(seed: int, device: torch.device) -> torch.Generator:
    """All of an agent's randomness comes from one generator (lock-step reproducibility)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


class OffPolicyAgent:
    """The learner-facing agent API: `bind`, `act`, `random_actions`, `observe_rewards`, `update`,
    `diagnostics`/`diag_names`, `capture_diagnostics`, `state_dict`.

    Subclasses build `actor`, `critics` (batched), `targets` and `temperature`, define `diag_names`,
    `update_variants()` (name -> update function; `variant(step)` picks one), `_explore(obs, env_ids)`
    and `_mean_action(obs)`, and write their scalars with `_record(name=tensor, ...)`."""

    diag_names: tuple[str, ...] = ()
    actor: nn.Module
    critics: nn.Module
    targets: nn.Module
    temperature: Temperature

    def __init__(self, obs_dim: int, critic_dim: int, action_dim: int, cfg: AlgoConfig,
                 device: torch.device) -> None:
        self.device = device
        self.action_dim = action_dim
        # Observation standardisation (algo.obs_normalization): the agent sees normalised actor and
        # critic observations everywhere; the replay keeps raw ones.
        enabled = cfg.obs_normalization
        self.obs_norm = ObsNormalizer(obs_dim, enabled).to(device)
        self.log_std_bounds = (cfg.log_std_min, cfg.log_std_max)
        # uniform: random actions until learning starts; policy: the initial policy acts from the
        # first step (near its zero mean: the default pose for joint targets).
        self.warmup_actions = cfg.warmup_actions
        self.critic_norm = ObsNormalizer(critic_dim, enabled).to(device)
        self.generator = seeded_generator(cfg.seed, device)
        # Decided once, when the agent is built (SOAKLAB_LEARNER_CUDA_GRAPH is read here).
        self.graphs = graph_requested(device)
        self.compilation = Compilation(cfg.compile, device)
        # NaN until a value is first written: the logger skips what no update has produced yet.
        self.diagnostics = torch.full((len(self.diag_names),), float("nan"), device=device)
        # Which diagnostics an update has written: the NaN above means "none yet", not a divergence.
        self.written = torch.zeros(len(self.diag_names), dtype=torch.bool, device=device)
        self._index = {name: i for i, name in enumerate(self.diag_names)}
        self.replay: ReplayRing | None = None
        self.batch_size = 0
        self._updates: dict[str, CapturedStep] = {}
        self.dp: DataParallel | None = None  # data parallelism: set by join()
        self._inference: dict[tuple[int, int], tuple[CapturedStep, torch.Tensor, torch.Tensor]] = {}

    # -- wiring ------------------------------------------------------------------------------------
    def bind(self, replay: ReplayRing, batch_size: int) -> None:
        """Updates sample `batch_size` rows from `replay` (inside the captured step)."""
        self.replay, self.batch_size = replay, batch_size
        generators = (self.generator, replay.generator)
        # Compiled (algo.compile) before the first call: the start-up calls, eager on a side stream
        # before capture, are also the ones that compile.
        self.compilation.networks(self.compiled_networks())
        self._updates = {name: CapturedStep(f"update_{name}", self.compilation.step(name, fn), self.device,
                                            generators, requested=self.graphs)
                         for name, fn in self.update_variants().items()}

    def update_variants(self) -> dict[str, Callable[[], None]]:
        raise NotImplementedError

    def compiled_networks(self) -> list[nn.Module]:
        """The networks `algo.compile=nets` compiles (their forwards also serve inference)."""
        return [self.actor, self.critics, self.targets]

    def variant(self, step: int) -> str:
        return next(iter(self._updates))

    def _batch(self) -> dict[str, torch.Tensor]:
        """A replay batch with normalised observations (the statistics first take in this batch)."""
        assert self.replay is not None, "bind() the replay ring first"
        batch = self.replay.sample(self.batch_size)
        self.obs_norm.update(batch["obs"], self.dp)
        self.critic_norm.update(batch["critic"], self.dp)
        for key, norm in (("obs", self.obs_norm), ("next_obs", self.obs_norm), ("critic", self.critic_norm),
                          ("next_critic", self.critic_norm)):
            batch[key] = norm(batch[key])
        return batch

    def _record(self, **values: torch.Tensor) -> None:
        """Write scalars into the diagnostics buffer (device to device: no host read)."""
        with torch.no_grad():
            for name, value in values.items():
                self.diagnostics[self._index[name]].copy_(value.detach().reshape(()))
                self.written[self._index[name]].fill_(True)

    def non_finite_diagnostics(self) -> torch.Tensor:
        """One flag per diagnostic (diag_names): written by an update and not finite. On the device,
        no host read: soaklab.rl.finite decides when it is read."""
        return self.written & ~torch.isfinite(self.diagnostics)

    # -- data parallelism ---------------------------------------------------------------------------
    def join(self, dp: DataParallel) -> None:
        """Take rank 0's model (parameters and buffers); from now on every optimizer step averages
        its gradients over the ranks. Before bind(): the captured updates include the collectives."""
        self.dp = dp
        dp.broadcast(self.modules())
        dp.collective_warmup(self.device)

    def modules(self) -> list[nn.Module]:
        return [self.actor, self.critics, self.targets, self.temperature, self.obs_norm, self.critic_norm]

    def _step(self, optimizer: torch.optim.Optimizer, module: nn.Module) -> None:
        """optimizer.step() after the gradients of `module` are averaged over the ranks (if any)."""
        if self.dp is not None:
            self.dp.average_grads(module)
        optimizer.step()

    def _sync_buffers(self, module: nn.Module) -> None:
        if self.dp is not None:
            self.dp.average_buffers(module)

    # -- the learner's calls -----------------------------------------------------------------------
    def update(self, step: int) -> None:
        """One gradient update (`step` counts updates; it picks the variant, e.g. with the actor)."""
        self._updates[self.variant(step)]()

    @torch.no_grad()
    def act(self, obs: torch.Tensor, env_ids: slice, explore: bool = True) -> torch.Tensor:
        """Actions for the envs `env_ids`. The exploring call of each env group is one captured
        step that reads a static input buffer; its result is valid until the group's next call."""
        if not explore:
            return self._mean_action(self.obs_norm(obs))
        key = (env_ids.start or 0, env_ids.stop)
        if key not in self._inference:
            static_obs = torch.zeros_like(obs)
            out = torch.zeros(obs.shape[0], self.action_dim, device=self.device)

            def step() -> None:
                out.copy_(self._explore(self.obs_norm(static_obs), env_ids))

            self._inference[key] = (CapturedStep(f"inference_{key[0]}_{key[1]}", step, self.device,
                                                 (self.generator,), requested=self.graphs), static_obs, out)
        captured, static_obs, out = self._inference[key]
        static_obs.copy_(obs)
        captured()
        return out

    def random_actions(self, count: int) -> torch.Tensor:
        return torch.rand(count, self.action_dim, generator=self.generator, device=self.device) * 2 - 1

    def observe_rewards(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        """Per-vector reward statistics (FlashSAC's return scale); none by default."""

    def capture_diagnostics(self) -> dict[str, Any]:
        steps = list(self._updates.values()) + [c for c, _, _ in self._inference.values()]
        return graph_diagnostics(steps) | {"compile": self.compilation.diagnostics()}

    def close(self) -> None:
        for step in [*self._updates.values(), *(c for c, _, _ in self._inference.values())]:
            step.close()

    def _explore(self, obs: torch.Tensor, env_ids: slice) -> torch.Tensor:
        raise NotImplementedError

    def _mean_action(self, obs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {**self.networks(), "obs_norm": self.obs_norm.state_dict(),
                "critic_norm": self.critic_norm.state_dict()}

    def networks(self) -> dict[str, Any]:
        return {"actor": self.actor.state_dict(), "critics": self.critics.state_dict(),
                "targets": self.targets.state_dict(), "temperature": self.temperature.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The inverse of state_dict(): every network and normaliser from a checkpoint's `agent`."""
        for name, value in state.items():
            getattr(self, name).load_state_dict(value)
