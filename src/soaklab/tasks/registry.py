"""Build a task's batched env from a run's typed config (the one place tasks are constructed)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import torch

from soaklab.contract.contract import MAX_SEED
from soaklab.contract.sections import RunConfig
from soaklab.errors import InvalidInput, SettingError
from soaklab.tasks.env import BatchedEnv, StepResult

SIM_BACKENDS_BUILT = ("mujoco", "mjwarp")


COMPILE_ENV = "SOAKLAB_TORCH_COMPILE"


def compile_terms_from_env() -> bool:
    """Task terms run torch.compile'd unless SOAKLAB_TORCH_COMPILE=0 (eager: same code, no compile wait)."""
    return os.environ.get(COMPILE_ENV, "1") != "0"


def make_env(task: str, run: RunConfig, scene: Path | str | Mapping[str, str] | None = None,
             device: str = "cpu", compile_terms: bool | None = None) -> BatchedEnv:
    """The env for `task` with the algo/env/task settings of a run's typed config. `scene`: one scene,
    or (a motion library) each clip path's scene (soaklab.config.run_config.scene_for_env)."""
    if compile_terms is None:
        compile_terms = compile_terms_from_env()
    env, num_envs = run.env, run.algo.num_envs
    backend = run.training.sim_backend
    if backend not in SIM_BACKENDS_BUILT:
        raise SettingError("training.sim_backend", backend, f"this build steps {', '.join(SIM_BACKENDS_BUILT)} only")
    if backend == "mjwarp" and task != "g1_motion_tracking":
        raise SettingError("training.sim_backend", backend, f"task {task} steps on mujoco only")
    if task == "g1_motion_tracking":
        from soaklab.assets.motion import load_motion
        from soaklab.assets.scene import load_scene
        from soaklab.tasks.g1_motion_tracking import G1MotionTrackingEnv, TrackingConfig

        if scene is None or env.motion is None:
            raise InvalidInput("g1_motion_tracking needs the scene and env.motion; run `soaklab assets pull`")
        tracking = TrackingConfig.from_config(run.task)

        def one(motion: str, scene_path: str, n: int, seed: int) -> G1MotionTrackingEnv:
            clip = load_motion(Path(motion), load_scene(Path(scene_path)))
            return G1MotionTrackingEnv(str(scene_path), clip, tracking, n, seed, env.num_threads, env.sampler,
                                       env.episode_length_s, device, compile_terms, sim=backend)

        if isinstance(env.motion, str):
            return one(env.motion, str(scene if not isinstance(scene, Mapping) else scene[env.motion]), num_envs,
                       env.seed)
        from soaklab.tasks.library import MotionLibraryEnv, block_sizes
        from soaklab.tasks.metrics import clip_labels

        sizes = block_sizes(num_envs, len(env.motion))
        return MotionLibraryEnv(clip_labels(env.motion), [
            one(m, str(scene[m] if isinstance(scene, Mapping) else scene), n, (env.seed + k) % (MAX_SEED + 1))
            for k, (m, n) in enumerate(zip(env.motion, sizes, strict=True))])
    if task == "cartpole_swingup":
        from soaklab.tasks.cartpole import CartpoleSwingupEnv, SwingupConfig

        return CartpoleSwingupEnv(SwingupConfig.from_config(run.task), num_envs, env.seed, env.num_threads,
                                  env.episode_length_s, device)
    raise SettingError("--task", task, "has no env builder")


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
