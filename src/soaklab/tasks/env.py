"""The batched env API every task implements (docs/assets-and-tasks.md).

All tensors have leading dimension N (envs) and live on the env's tensor
device. `step` returns the observations after any resets, plus the final
observations of the envs that ended (their last observation, not the reset
one), so a replay row's next_obs is always the true successor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from soaklab.tasks.spaces import TaskSpaces


@dataclass(frozen=True)
class StepResult:
    obs: torch.Tensor  # [N, actor_obs] after resets
    critic_obs: torch.Tensor  # [N, critic_obs] after resets
    reward: torch.Tensor  # [N]
    terminated: torch.Tensor  # [N] bool: a failure; bootstrapping stops
    truncated: torch.Tensor  # [N] bool: time limit or clip end; bootstrapping continues
    final_obs: torch.Tensor  # [N, actor_obs] before resets (equals obs where nothing ended)
    final_critic_obs: torch.Tensor  # [N, critic_obs] before resets
    reward_terms: dict[str, torch.Tensor]  # each [N], weighted as summed into reward
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # each [N]: task measures, not rewarded
    # A motion library's blocks: (clip label, its envs' slice), in env order; () for one clip.
    clips: tuple[tuple[str, slice], ...] = ()

    @property
    def done(self) -> torch.Tensor:
        return self.terminated | self.truncated


class BatchedEnv(Protocol):
    num_envs: int
    device: torch.device
    spaces: TaskSpaces

    def reset(self, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Reset the envs in `mask` (all when None); return (obs, critic_obs) of every env."""
        ...

    def step(self, actions: torch.Tensor) -> StepResult: ...

    def diagnostics(self) -> dict: ...

    def physics_unstable(self) -> int:
        """How many times the simulator reset an env as unstable since the last call (MuJoCo's
        "The simulation is unstable" warnings; soaklab.rl.diverged)."""
        ...

    def close(self) -> None: ...
