"""Build a task's batched env from a composed config (the one place tasks are constructed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from soaklab.errors import InvalidInput, SettingError
from soaklab.tasks.env import BatchedEnv, StepResult

SIM_BACKENDS_BUILT = ("mujoco", "mjwarp")


COMPILE_ENV = "SOAKLAB_TORCH_COMPILE"


def compile_terms_from_env() -> bool:
    """Task terms run torch.compile'd unless SOAKLAB_TORCH_COMPILE=0 (eager: same code, no compile wait)."""
    return os.environ.get(COMPILE_ENV, "1") != "0"


def make_env(task: str, config: dict[str, Any], scene: Path | None = None, device: str = "cpu",
             compile_terms: bool | None = None) -> BatchedEnv:
    """The env for `task` with the algo/env/task settings of a composed config."""
    if compile_terms is None:
        compile_terms = compile_terms_from_env()
    env_cfg, algo = config["env"], config["algo"]
    backend = config["training"]["sim_backend"]
    if backend not in SIM_BACKENDS_BUILT:
        raise SettingError("training.sim_backend", backend, f"this build steps {', '.join(SIM_BACKENDS_BUILT)} only")
    if backend == "mjwarp" and task != "g1_motion_tracking":
        raise SettingError("training.sim_backend", backend, f"task {task} steps on mujoco only")
    if task == "g1_motion_tracking":
        from soaklab.assets.motion import load_motion
        from soaklab.assets.scene import load_scene
        from soaklab.tasks.g1_motion_tracking import G1MotionTrackingEnv, TrackingConfig

        if scene is None or env_cfg["motion"] is None:
            raise InvalidInput("g1_motion_tracking needs the scene and env.motion; run `soaklab assets pull`")
        clip = load_motion(Path(env_cfg["motion"]), load_scene(Path(scene)))
        return G1MotionTrackingEnv(str(scene), clip, TrackingConfig.from_config(config["task"]), algo["num_envs"],
                                   env_cfg["seed"], env_cfg["num_threads"], env_cfg["sampler"],
                                   env_cfg["episode_length_s"], device, compile_terms, sim=backend)
    if task == "cartpole_swingup":
        from soaklab.tasks.cartpole import CartpoleSwingupEnv, SwingupConfig

        return CartpoleSwingupEnv(SwingupConfig.from_config(config["task"]), algo["num_envs"], env_cfg["seed"],
                                  env_cfg["num_threads"], env_cfg["episode_length_s"], device)
    raise SettingError("--task", task, "has no env builder")


def step_metrics(result: StepResult) -> dict[str, torch.Tensor]:
    """One env step's values of every collector metric, each [N]."""
    values = {f"reward/{k}": v for k, v in result.reward_terms.items()}
    values["episodes/terminated"] = result.terminated.to(torch.float32)
    values["episodes/truncated"] = result.truncated.to(torch.float32)
    values.update({f"tracking/{k}": v for k, v in result.metrics.items()})
    return values
