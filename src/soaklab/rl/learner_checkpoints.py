"""The learner's checkpoints: the policy's `checkpoints/model_<k>.pt`, and its half of a resumable
checkpoint (soaklab.rl.resume): written after the collector's, read back before the collector is
spawned, and what they cost (the run summary's `learner_diagnostics.resume`)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from soaklab.files.checkpoints import collector_path, learner_path
from soaklab.rl.agents.common import OffPolicyAgent
from soaklab.rl.faults import Fault
from soaklab.rl.learning import Learning
from soaklab.rl.resume import (
    Checkpoint,
    host_rng_state,
    load_tensor_state,
    prune,
    save_atomic,
    set_host_rng_state,
    tensor_state,
)
from soaklab.rl.wall_budget import WallBudget

# Attributes of an agent that are wiring, not training state (the replay is saved on its own).
AGENT_NOT_STATE = frozenset({"replay", "dp", "compilation"})


class LearnerCheckpoints:
    """`resume`: the checkpoint this run continues from, if any. A data-parallel run would need every
    rank's checkpoint, taken at one iteration and resumed together (docs/runtime.md, "Resuming a
    run"): one process is resumable, on either backend."""

    def __init__(self, run_dir: Path, resume: Checkpoint | None, world_size: int, fault: Fault | None,
                 code: dict[str, Any] | None = None) -> None:
        self.run_dir, self.resume, self.fault = run_dir, resume, fault
        self.code = code  # the code this run runs (soaklab.host.run_code), for a resume to compare
        self.start_iteration = resume.iteration if resume is not None else 0
        self.resumable = world_size == 1
        self.record: dict[str, Any] = {
            "resumable": self.resumable, "resumed_from": self.start_iteration if resume is not None else None,
            "checkpoints_written": 0, "last_iteration": None}

    def due(self, name: str) -> bool:
        """A resume's kill test hook (SOAKLAB_FAULT=<name>@<the iteration it resumes at>)."""
        return self.resume is not None and self.fault is not None and self.fault.due(name, self.start_iteration)

    def policy(self, name: str, iteration: int, env_steps: int, config_hash: str, agent: OffPolicyAgent,
               budget: WallBudget) -> None:
        """checkpoints/<name>: the agent's networks and normalisers. Serialised in memory, written by
        Python (save_atomic): a full disk is then an OSError naming ENOSPC, not the "basic_ios::clear"
        torch's own file writer reports, and leaves no partial checkpoint behind."""
        save_atomic({"iteration": iteration, "env_steps": env_steps, "config_hash": config_hash,
                     "elapsed_s": budget.elapsed_s(),  # the run's training time from launch (evaluate reports it)
                     "agent": agent.state_dict()}, self.run_dir / "checkpoints" / name)

    def save(self, k: int, started: float, learning: Learning, metrics: np.ndarray, env_steps: int,
             config_hash: str, elapsed_s: float) -> None:
        """The learner's half of resumable checkpoint k, after the collector's (the caller has put
        the event rows up to iteration k - 1 on disk: a resume never has a gap). `started`: when the
        caller began it (time.perf_counter()), so its cost counts the flush; `metrics`: the
        collector's metric row."""
        replay = learning.replay
        rows = replay.storage if replay.size == replay.capacity else replay.storage[: replay.size]
        payload = {
            "iteration": k, "env_steps": env_steps, "config_hash": config_hash,
            "update_count": learning.update_count, "exact": True,
            "agent": tensor_state(learning.agent, skip=AGENT_NOT_STATE),
            "replay": {"rows": rows.detach().clone(), "ptr": replay.ptr, "size": replay.size,
                       "generator": replay.generator.get_state()},
            "stats": learning.stats.state_dict(), "metrics": torch.from_numpy(metrics.copy()),
            "host_rng": host_rng_state(), "collector": collector_path(self.run_dir, k).name,
            "elapsed_s": elapsed_s, **({"code": self.code} if self.code is not None else {}),
        }
        learner_bytes = save_atomic(payload, learner_path(self.run_dir, k))
        collector_bytes = collector_path(self.run_dir, k).stat().st_size
        prune(self.run_dir)
        # What a checkpoint costs: the learner's side in time (the collector's is in its env step).
        self.record.update(checkpoints_written=self.record["checkpoints_written"] + 1, last_iteration=k,
                           last_learner_bytes=learner_bytes, last_collector_bytes=collector_bytes,
                           last_learner_seconds=round(time.perf_counter() - started, 4))

    def restore(self, learning: Learning, metrics: np.ndarray) -> int:
        """Everything save() wrote, before the collector is spawned and the agent is bound: the run's
        env steps."""
        assert self.resume is not None
        state = self.resume.learner
        load_tensor_state(learning.agent, state["agent"])
        if self.due("kill_checkpoint_load"):  # the agent restored, the rest not yet
            os.kill(os.getpid(), signal.SIGKILL)
        replay, saved = learning.replay, state["replay"]
        replay.storage[: saved["rows"].shape[0]].copy_(saved["rows"])
        replay.ptr, replay.size = int(saved["ptr"]), int(saved["size"])
        replay.size_t.fill_(replay.size)
        replay.ptr_t.fill_(replay.ptr)
        replay.generator.set_state(saved["generator"])
        learning.stats.load_state_dict(state["stats"])
        metrics[:] = state["metrics"].numpy()
        learning.update_count = int(state["update_count"])
        set_host_rng_state(state["host_rng"])
        return int(state["env_steps"])
