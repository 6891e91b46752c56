"""Run in a fresh process by tests/host/test_compile_cache.py: build a G1 env with torch.compile'd
task terms (the inductor cache is whatever the environment says), step it, and save what it produced,
what the same steps give with eager terms, and how often inductor's FX-graph cache hit or missed.

    python tests/host/compiled_terms_probe.py SCENE MOTION OUT.pt
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from torch._dynamo.utils import counters

from soaklab.config.compose import compose
from soaklab.host.info import cpu_capability
from soaklab.tasks.env import EnvSpec
from soaklab.tasks.registry import make_env


def _steps(run, scene: str, compile_terms: bool) -> dict[str, torch.Tensor]:
    env = make_env(run, EnvSpec.of(run), Path(scene), compile_terms=compile_terms)
    generator = torch.Generator().manual_seed(0)
    rewards, observations = [], []
    env.reset()
    for _ in range(5):
        result = env.step(torch.rand(4, env.spaces.action, generator=generator) * 2 - 1)
        rewards.append(result.reward.clone())
        observations.append(result.obs.clone())
    env.close()
    return {"reward": torch.stack(rewards), "obs": torch.stack(observations)}


def main(scene: str, motion: str, out: str) -> None:
    torch.set_num_threads(1)
    run = compose("sac", "g1_motion_tracking", "mujoco", ["algo.num_envs=4", f"env.motion={json.dumps(motion)}",
                                                         "env.num_threads=1"]).run
    compiled = _steps(run, scene, compile_terms=True)
    inductor = counters["inductor"]
    torch.save({"capability": cpu_capability(), "cache": os.environ["TORCHINDUCTOR_CACHE_DIR"],
                "fxgraph_cache": {"hit": inductor["fxgraph_cache_hit"], "miss": inductor["fxgraph_cache_miss"]},
                **compiled, "eager": _steps(run, scene, compile_terms=False)}, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
