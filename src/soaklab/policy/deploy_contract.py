"""The policy contract `soaklab export` writes into the ONNX file and beside it (docs/export.md, "The
contract"): the task's half, from its catalogue entry's `contract` function (the task names its own
observation blocks, action mapping, reset, terminations and metrics), and what every contract holds:
the schema version, soaklab's version, the run's config hash, iteration and seed, the graph's hash,
and the probe, the observations the policy met in its own task over its first control steps from a
noise-free start, which `soaklab deploy-check` rebuilds from the contract alone before it trusts it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

import soaklab
from soaklab.catalogue import TASKS, load
from soaklab.deploy.contract import SCHEMA_VERSION
from soaklab.policy.trained import TrainedRun

PROBE_STEPS = 3
# Relative to 1 + |value|: the contract rebuilt by another program differs from the task's own float32
# arithmetic by rounding (1e-6 at most in practice); a wrong joint, pose or scale by far more.
PROBE_TOLERANCE = 1e-4


def has_contract(trained: TrainedRun) -> bool:
    task = TASKS.get(trained.task)
    return task is not None and task.contract is not None


def task_part(trained: TrainedRun, env: Any) -> dict[str, Any]:
    """The task's half, from `env` (the run's task as playback builds it, with the run's settings)."""
    function = load(TASKS[trained.task].contract)  # type: ignore[arg-type]
    return function(trained.run, trained.record["run"].get("assets"), env)


@torch.no_grad()
def probe(trained: TrainedRun, act: Any) -> dict[str, Any]:
    """The first PROBE_STEPS observations of one env of the task from its reset without noise (a
    tracking task: the clip's first frame), and the actions `act` (the ONNX session) takes there."""
    from soaklab.policy.rollout import playback_config, playback_spec
    from soaklab.tasks.registry import make_env

    run = playback_config(trained)
    calm = {key: 0.0 for key in run.task.get("reset_noise", {})}
    run = replace(run, task={**run.task, "reset_noise": calm})
    env = make_env(run, playback_spec(trained, 1), trained.scene(), compile_terms=False)
    tracking = TASKS[trained.task].tracking
    observations, actions = [], []
    try:
        obs = env.start_at_first_frame() if tracking else env.reset()[0]
        for _ in range(PROBE_STEPS):
            action = act(obs.numpy().astype(np.float32))
            observations.append(obs[0].tolist())
            actions.append(action[0].tolist())
            step = torch.from_numpy(action)
            obs = env.step_without_reset(step)[4] if tracking else env.step(step).obs
    finally:
        env.close()
    return {"start": "the task's reset with its noise set to zero" + (" (the clip's first frame)" if tracking else ""),
            "clip": Path(str(trained.playback_clip)).stem if tracking else None,
            "observations": observations, "actions": actions, "tolerance": PROBE_TOLERANCE}


def build_contract(trained: TrainedRun, task: dict[str, Any], graph_sha256: str, obs_dim: int, act_dim: int,
                   probed: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "soaklab_policy_contract",
        "soaklab_version": soaklab.__version__,
        "task": trained.task,
        "algo": trained.record["algo"],
        "run": {"config_hash": trained.record["config_hash"], "iteration": trained.iteration,
                "seed": int(trained.run.env.seed)},
        "model_file": {"format": "onnx", "graph_sha256": graph_sha256,
                       "input": {"name": "obs", "shape": ["batch", obs_dim], "dtype": "float32"},
                       "output": {"name": "action", "shape": ["batch", act_dim], "dtype": "float32"}},
        **task,
        "probe": probed,
    }
