"""A motion library: `env.motion` as a list of clips, the envs spread over them in blocks.

Block k of the envs tracks clip k, each block a whole G1 tracking env of its own: its clip, its
scene (a terrain clip brings its own), its adaptive phase sampler and its RNG stream (env.seed + k),
so one clip's failures never skew where another's episodes start. The library steps the blocks one
after the other and presents them as one batched env, in block order; `StepResult.clips` names the
blocks, so the collector also reports each clip's episode ends and tracking error on their own
(`clip/<label>/...`, soaklab.tasks.metrics).
"""

from __future__ import annotations

from typing import Any

import torch

from soaklab.tasks.env import StepResult


class MotionLibraryEnv:
    def __init__(self, labels: tuple[str, ...], envs: list[Any]) -> None:
        self.labels, self.envs = labels, envs
        self.num_envs = sum(e.num_envs for e in envs)
        self.device, self.spaces = envs[0].device, envs[0].spaces
        starts = [0]
        for env in envs:
            starts.append(starts[-1] + env.num_envs)
        self.blocks = tuple(slice(a, b) for a, b in zip(starts[:-1], starts[1:], strict=True))
        self.clips = tuple(zip(labels, self.blocks, strict=True))

    def reset(self, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        parts = [env.reset(None if mask is None else mask[block]) for env, block in zip(self.envs, self.blocks,
                                                                                         strict=True)]
        return torch.cat([o for o, _ in parts]), torch.cat([c for _, c in parts])

    def step(self, actions: torch.Tensor) -> StepResult:
        results = [env.step(actions[block]) for env, block in zip(self.envs, self.blocks, strict=True)]
        first = results[0]
        return StepResult(
            obs=torch.cat([r.obs for r in results]), critic_obs=torch.cat([r.critic_obs for r in results]),
            reward=torch.cat([r.reward for r in results]), terminated=torch.cat([r.terminated for r in results]),
            truncated=torch.cat([r.truncated for r in results]), final_obs=torch.cat([r.final_obs for r in results]),
            final_critic_obs=torch.cat([r.final_critic_obs for r in results]),
            reward_terms={k: torch.cat([r.reward_terms[k] for r in results]) for k in first.reward_terms},
            metrics={k: torch.cat([r.metrics[k] for r in results]) for k in first.metrics},
            clips=self.clips,
        )

    def state_dict(self) -> dict[str, Any]:
        return {"blocks": [env.state_dict() for env in self.envs]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["blocks"]) != len(self.envs):
            raise ValueError(f"{len(state['blocks'])} clip blocks saved, {len(self.envs)} in this library")
        for env, block in zip(self.envs, state["blocks"], strict=True):
            env.load_state_dict(block)

    def physics_unstable(self) -> int:
        return sum(env.physics_unstable() for env in self.envs)

    def diagnostics(self) -> dict[str, Any]:
        """The first block's backend diagnostics (every block runs the same backend), and the library."""
        return {**self.envs[0].diagnostics(),
                "motion_library": {label: {"envs": block.stop - block.start}
                                   for label, block in self.clips}}

    def close(self) -> None:
        for env in self.envs:
            env.close()
