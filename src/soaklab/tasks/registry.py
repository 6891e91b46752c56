"""Build a task's batched env from a run's typed config (the one place tasks are constructed)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import torch

from soaklab.catalogue import BACKENDS, TASKS, choices, load
from soaklab.contract.sections import RunConfig
from soaklab.errors import SettingError
from soaklab.tasks.env import BatchedEnv, EnvSpec, StepResult

COMPILE_ENV = "SOAKLAB_TORCH_COMPILE"


def compile_terms_from_env() -> bool:
    """Task terms run torch.compile'd unless SOAKLAB_TORCH_COMPILE=0 (eager: same code, no compile wait)."""
    return os.environ.get(COMPILE_ENV, "1") != "0"


def make_env(run: RunConfig, spec: EnvSpec, scene: Path | str | Mapping[str, str] | None = None,
             compile_terms: bool | None = None) -> BatchedEnv:
    """The env of the run's task (`run.task_name`): `spec`'s envs (count, seed, backend, device) with
    the env/task settings of a run's typed config, built by the task's catalogue builder
    (soaklab.catalogue.TASKS). `scene`: one scene, or (a motion library) each clip path's scene
    (soaklab.assets.record.scene_for_env)."""
    if compile_terms is None:
        compile_terms = compile_terms_from_env()
    task = run.task_name
    if task not in TASKS:
        raise SettingError("--task", task, f"must be one of {choices(TASKS)}")
    if spec.sim not in BACKENDS:
        raise SettingError("training.sim_backend", spec.sim, f"this build steps {choices(BACKENDS)} only")
    if spec.sim not in TASKS[task].backends:
        raise SettingError("training.sim_backend", spec.sim,
                           f"task {task} steps on {', '.join(TASKS[task].backends)} only")
    return load(TASKS[task].builder)(run, spec, scene, compile_terms)


def step_metrics(result: StepResult) -> dict[str, torch.Tensor]:
    """One env step's values of every collector metric, each [N]."""
    values = {f"reward/{k}": v for k, v in result.reward_terms.items()}
    values["episodes/terminated"] = result.terminated.to(torch.float32)
    values["episodes/truncated"] = result.truncated.to(torch.float32)
    values.update({f"tracking/{k}": v for k, v in result.metrics.items()})
    for label, envs in result.clips:  # a motion library: each clip's block of envs on its own
        for key in [k for k in values if k.startswith(("episodes/", "tracking/"))]:
            values[f"clip/{label}/{key}"] = values[key][envs]
    return values
