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
from soaklab.tasks.env import StepResult


def playback_config(trained: TrainedRun, envs: int) -> RunConfig:
    """The run's config on the CPU backend with `envs` envs (a GPU-trained policy plays on MuJoCo),
    tracking the playback clip (a motion library's first: `soaklab evaluate` judges every clip)."""
    run = trained.run
    return replace(run, algo=replace(run.algo, num_envs=envs),
                   env=replace(run.env, motion=trained.playback_clip, collector_tensor_device="cpu", num_threads=1),
                   training=replace(run.training, sim_backend="mujoco"))


@contextmanager
def playback_env(trained: TrainedRun, envs: int) -> Iterator[Any]:
    """The run's task with `envs` envs on MuJoCo, closed afterwards."""
    from soaklab.tasks.registry import make_env

    env = make_env(trained.task, playback_config(trained, envs), trained.scene(), device="cpu",
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
