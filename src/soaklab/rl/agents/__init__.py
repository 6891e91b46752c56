"""Off-policy agents: SAC and FlashSAC, selected by --algo."""

from __future__ import annotations

import torch

from soaklab.contract.sections import AlgoConfig, FlashSACConfig
from soaklab.rl.agents.common import OffPolicyAgent


def make_agent(algo: str, obs_dim: int, critic_dim: int, action_dim: int, num_envs: int, cfg: AlgoConfig,
               device: torch.device) -> OffPolicyAgent:
    """The agent `algo` with its typed settings (soaklab.contract.sections.algo_config)."""
    if algo == "sac":
        from soaklab.rl.agents.sac import SACAgent

        return SACAgent(obs_dim, critic_dim, action_dim, num_envs, cfg, device)
    if algo == "flashsac":
        from soaklab.rl.agents.flashsac import FlashSACAgent

        if not isinstance(cfg, FlashSACConfig):
            raise TypeError(f"flashsac needs a FlashSACConfig, got {type(cfg).__name__}")
        return FlashSACAgent(obs_dim, critic_dim, action_dim, num_envs, cfg, device)
    raise ValueError(f"unknown algo {algo!r}")
