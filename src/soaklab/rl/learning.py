"""What the learner trains: the agent, its replay ring, the episode statistics and the update count
(what a resumable checkpoint holds of it, with the counters), and what an iteration asks of them: the
answers to the collector's observations and the update round (the schedule says which and how many,
soaklab.rl.schedule)."""

from __future__ import annotations

from typing import Any

import torch

from soaklab.config.run_config import ResolvedRun
from soaklab.contract.contract import MAX_SEED
from soaklab.contract.sections import AlgoConfig
from soaklab.rl.agents import make_agent
from soaklab.rl.agents.common import OffPolicyAgent
from soaklab.rl.exchange import Act
from soaklab.rl.logging import EpisodeStats
from soaklab.rl.replay import ReplayRing
from soaklab.rl.timing import PhaseTimer


class Learning:
    def __init__(self, agent: OffPolicyAgent, replay: ReplayRing, stats: EpisodeStats) -> None:
        self.agent, self.replay, self.stats = agent, replay, stats
        self.update_count = 0

    @classmethod
    def build(cls, resolved: ResolvedRun, algo: AlgoConfig, device: torch.device) -> Learning:
        """The agent first (its networks draw from the seeded global RNG), then the replay ring, whose
        sampling has a generator of its own (seeded algo.seed + 1)."""
        spaces, layout = resolved.spaces, resolved.layout
        agent = make_agent(resolved.composed.algo, spaces.actor_obs, spaces.critic_obs, spaces.action,
                           algo.num_envs, algo, device)
        replay = ReplayRing(algo.replay_buffer_size, layout.row_width, layout.row_slices(), device,
                            seed=(algo.seed + 1) % (MAX_SEED + 1), stride=algo.num_envs,
                            n_step=algo.n_step, gamma=algo.gamma)
        return cls(agent, replay, EpisodeStats(algo.num_envs))

    def policy(self, random_actions: bool) -> Act:
        """What answers a vector step: uniform random actions (before learning starts), else the policy."""
        if random_actions:
            return lambda obs, a, b: self.agent.random_actions(b - a)
        return lambda obs, a, b: self.agent.act(obs, slice(a, b), explore=True)

    def update(self, updates: int, timer: PhaseTimer) -> None:
        """An update round of `updates` gradient updates."""
        with timer.span("update"):
            for _ in range(updates):
                self.agent.update(self.update_count)
                self.update_count += 1

    def diagnostics(self, resume: dict[str, Any], log_interval: int, lag_vectors: int) -> dict[str, Any]:
        """The run summary's learner_diagnostics: the captured graphs, the resume record (`resume`:
        LearnerCheckpoints.record) and the schedule."""
        return {"cuda_graph": self.agent.capture_diagnostics(), "resume": resume,
                "schedule": {"update_lag_vectors": lag_vectors, "log_interval_iterations": log_interval,
                             "n_step": {"requested": self.replay.n_step_requested, "effective": self.replay.n_step}}}
