"""Run in a fresh process by tests/host/test_compile_cache.py: build a G1 env with torch.compile'd
task terms (which points inductor at its keyed cache under whatever base the environment names),
compile one of the task's reward terms there, and save what it computed, what the eager term gives
on the same inputs, and how often inductor's FX-graph cache hit or missed. One small term, not the
env's whole step graph: the cache's keying is the same for any graph, at a tenth of the compile
(the whole graph's compiled-vs-eager agreement is tests/tasks/g1_tracking/test_compile.py's).

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
from soaklab.tasks.g1_tracking import terms
from soaklab.tasks.registry import make_env


def main(scene: str, motion: str, out: str) -> None:
    torch.set_num_threads(1)
    run = compose("sac", "g1_motion_tracking", "mujoco", ["algo.num_envs=4", f"env.motion={json.dumps(motion)}",
                                                         "env.num_threads=1"]).run
    env = make_env(run, EnvSpec.of(run), Path(scene), compile_terms=True)  # keys the cache, compiles lazily
    assert env.compiled
    env.close()
    generator = torch.Generator().manual_seed(0)
    ref, robot = (torch.nn.functional.normalize(torch.randn(4, 14, 4, generator=generator), dim=-1) for _ in range(2))
    compiled = torch.compile(terms.body_ori_reward, dynamic=False)(ref, robot, 0.4)
    inductor = counters["inductor"]
    torch.save({"capability": cpu_capability(), "cache": os.environ["TORCHINDUCTOR_CACHE_DIR"],
                "fxgraph_cache": {"hit": inductor["fxgraph_cache_hit"], "miss": inductor["fxgraph_cache_miss"]},
                "reward": compiled, "eager": {"reward": terms.body_ori_reward(ref, robot, 0.4)}}, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
