"""A trained policy acting in its task on the MuJoCo (CPU) backend, deterministically: the
observations `soaklab export` checks parity on, and the frames `soaklab play` renders."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import torch

from soaklab.contract.sections import RunConfig
from soaklab.policy.trained import TrainedRun
from soaklab.tasks.env import EnvSpec, StepResult


def playback_config(trained: TrainedRun, clip: str | None = None) -> RunConfig:
    """The run's config as a playback steps it: one physics thread, tracking `clip` (default the
    playback clip: a motion library's first; `soaklab evaluate` judges every clip)."""
    run = trained.run
    return replace(run, env=replace(run.env, motion=clip or trained.playback_clip, num_threads=1))


def playback_spec(trained: TrainedRun, envs: int, sim: str = "mujoco", device: str = "cpu") -> EnvSpec:
    """`envs` envs from the run's seed, on MuJoCo by default (a GPU-trained policy plays on the CPU)."""
    return EnvSpec(envs, trained.run.env.seed, sim, device)


@contextmanager
def playback_env(trained: TrainedRun, envs: int) -> Iterator[Any]:
    """The run's task with `envs` envs on MuJoCo, closed afterwards."""
    from soaklab.tasks.registry import make_env

    env = make_env(playback_config(trained), playback_spec(trained, envs), trained.scene(),
                   compile_terms=False)
    try:
        yield env
    finally:
        env.close()


@torch.no_grad()
def roll_out(trained: TrainedRun, env: Any, steps: int,
             on_step: Callable[[int, Any, StepResult], None] | None = None) -> torch.Tensor:
    """Step every env of `env` for `steps` steps with the deterministic action; return every actor
    observation the policy saw, [steps * envs, obs]. `on_step(step, env, result)` sees each step."""
    obs, _ = env.reset()
    seen = []
    for step in range(steps):
        seen.append(obs.clone())
        result = env.step(trained.agent.act(obs, slice(0, obs.shape[0]), explore=False))
        if on_step is not None:
            on_step(step, env, result)
        obs = result.obs
    return torch.cat(seen)
