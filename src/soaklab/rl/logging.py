"""Run logging: one TensorBoard event file with namespaced tags, progress.json, terminal lines.

progress.json is rewritten by the training loop itself every few seconds (never
a heartbeat thread), so its mtime is evidence that the loop is alive.
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

import torch

from soaklab.jsonfiles import write_json_atomic

PROGRESS_EVERY_S = 2.0
TERMINAL_EVERY_S = 5.0


class EpisodeStats:
    """Per-env running return/length; finished episodes feed rolling means."""

    def __init__(self, num_envs: int, window: int = 100) -> None:
        self.returns = torch.zeros(num_envs, dtype=torch.float64)
        self.lengths = torch.zeros(num_envs, dtype=torch.long)
        self.finished_returns: deque[float] = deque(maxlen=window)
        self.finished_lengths: deque[int] = deque(maxlen=window)
        self.step_reward = 0.0

    def observe(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        rewards, dones = rewards.double().cpu(), dones.bool().cpu()
        self.step_reward = float(rewards.mean())
        self.returns += rewards
        self.lengths += 1
        for i in dones.nonzero(as_tuple=True)[0].tolist():
            self.finished_returns.append(float(self.returns[i]))
            self.finished_lengths.append(int(self.lengths[i]))
        self.returns[dones] = 0.0
        self.lengths[dones] = 0

    @property
    def mean_return(self) -> float | None:
        return sum(self.finished_returns) / len(self.finished_returns) if self.finished_returns else None

    @property
    def mean_length(self) -> float | None:
        return sum(self.finished_lengths) / len(self.finished_lengths) if self.finished_lengths else None


class RunLogger:
    def __init__(self, run_dir: Path, max_iterations: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.run_dir = run_dir
        self.writer = SummaryWriter(log_dir=str(run_dir), flush_secs=5)
        self.max_iterations = max_iterations
        self.start = time.monotonic()
        self._last_progress = 0.0
        self._last_terminal = 0.0

    def scalars(self, values: dict[str, float | None], step: int) -> None:
        for tag, value in values.items():
            if value is not None:
                self.writer.add_scalar(tag, value, step)

    def progress(self, iteration: int, env_steps: int, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_progress >= PROGRESS_EVERY_S:
            write_json_atomic(self.run_dir / "progress.json", {
                "iteration": iteration, "env_steps": env_steps, "wall_time_s": round(now - self.start, 3),
            })
            self._last_progress = now

    def terminal(self, iteration: int, fps: float, reward: float | None, length: float | None,
                 force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_terminal >= TERMINAL_EVERY_S:
            done = iteration / self.max_iterations
            elapsed = now - self.start
            eta = elapsed / done - elapsed if done > 0 else float("nan")
            shown = "-" if reward is None else f"{reward:.3f}"
            ep = "-" if length is None else f"{length:.0f}"
            print(f"train: it {iteration}/{self.max_iterations} | {fps:,.0f} env-steps/s | episode return {shown} "
                  f"| episode length {ep} | {elapsed:.0f}s elapsed, eta {eta:.0f}s", flush=True)
            self._last_terminal = now

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()
