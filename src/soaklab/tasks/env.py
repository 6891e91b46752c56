"""The batched env API every task implements (docs/assets-and-tasks.md).

All tensors have leading dimension N (envs) and live on the env's tensor
device. `step` returns the observations after any resets, plus the final
observations of the envs that ended (their last observation, not the reset
one), so a replay row's next_obs is always the true successor.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import torch

from soaklab.contract.contract import MAX_SEED
from soaklab.tasks.spaces import TaskSpaces

if TYPE_CHECKING:
    from soaklab.contract.sections import RunConfig


@dataclass(frozen=True)
class EnvSpec:
    """What `make_env` builds beside the task's own settings: how many envs, from which seed, on which
    simulator backend and tensor device. A run's config holds the env count once (algo.num_envs);
    a collector's inference group, a playback or an evaluation derives its spec from it here, never by
    patching the run."""

    num_envs: int
    seed: int
    sim: str
    device: str = "cpu"

    @classmethod
    def of(cls, run: RunConfig, device: str = "cpu") -> EnvSpec:
        """The run's own envs: algo.num_envs from env.seed on training.sim_backend."""
        return cls(run.algo.num_envs, run.env.seed, run.training.sim_backend, device)

    def group(self, size: int, group: int) -> EnvSpec:
        """One inference group's envs: its size, and a seed offset so groups differ (kept a valid seed)."""
        return replace(self, num_envs=size, seed=(self.seed + group) % (MAX_SEED + 1))


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


class TrackingEnv(BatchedEnv, Protocol):
    """What a tracking task's env (catalogue `Task(tracking=True)`) offers beside the batched env
    API: a reference clip to start at and follow. Evaluation (soaklab.policy.evaluate) reads only
    this, so any task whose entry declares the capability is evaluated alike, and no other is."""

    num_frames: int  # the clip's frames
    tracked: slice  # the tracked bodies, in the state dicts below
    root: int  # the root (pelvis) body, in the state dicts below

    def start_at_first_frame(self) -> torch.Tensor:
        """Every env at the clip's first frame (reset noise as configured); the actor observation."""
        ...

    def step_without_reset(self, actions: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor],
                                                                 torch.Tensor, torch.Tensor, torch.Tensor]:
        """One control step with no reset and no time limit: (robot state, reference state, the
        reference frame, terminations, the next actor observation)."""
        ...
