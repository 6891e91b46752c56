"""Off-policy agents: SAC and FlashSAC, selected by --algo."""

from __future__ import annotations

from typing import Any

import torch

from soaklab.rl.agents.common import OffPolicyAgent


def make_agent(algo: str, obs_dim: int, critic_dim: int, action_dim: int, num_envs: int, cfg: dict[str, Any],
               device: torch.device) -> OffPolicyAgent:
    if algo == "sac":
        from soaklab.rl.agents.sac import SACAgent

        return SACAgent(obs_dim, critic_dim, action_dim, num_envs, cfg, device)
    if algo == "flashsac":
        from soaklab.rl.agents.flashsac import FlashSACAgent

        return FlashSACAgent(obs_dim, critic_dim, action_dim, num_envs, cfg, device)
    raise ValueError(f"unknown algo {algo!r}")
