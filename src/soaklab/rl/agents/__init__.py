"""Off-policy agents, selected by --algo from the catalogue (soaklab.catalogue.ALGORITHMS)."""

from __future__ import annotations

import torch

from soaklab.catalogue import ALGORITHMS, choices, load
from soaklab.contract.sections import AlgoConfig
from soaklab.rl.agents.common import OffPolicyAgent


def make_agent(algo: str, obs_dim: int, critic_dim: int, action_dim: int, num_envs: int, cfg: AlgoConfig,
               device: torch.device) -> OffPolicyAgent:
    """The agent `algo` with its typed settings (soaklab.contract.sections.algo_config)."""
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown algo {algo!r}; expected one of {choices(ALGORITHMS)}")
    entry = ALGORITHMS[algo]
    config_class = load(entry.config)
    if not isinstance(cfg, config_class):
        raise TypeError(f"{algo} needs a {config_class.__name__}, got {type(cfg).__name__}")
    return load(entry.agent)(obs_dim, critic_dim, action_dim, num_envs, cfg, device)
