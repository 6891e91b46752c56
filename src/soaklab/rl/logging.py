"""Run logging: one TensorBoard event file with namespaced tags, progress.json, terminal lines.

What the learner logs per iteration partly lives on its device (rewards, dones,
loss scalars). `DeviceLog` keeps those rows in device buffers and reads them
back once per logging interval (one host synchronisation per interval, none
per iteration); every iteration still gets its own TensorBoard step.

progress.json is rewritten by the training loop itself every few seconds (never
a heartbeat thread), so its mtime is evidence that the loop is alive.
"""

from __future__ import annotations

import json
import math
import os
import queue
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from soaklab.files.jsonfiles import write_json_atomic
from soaklab.metrics.tags import IDENTITY_TAG, RUN_CONFIG_TAG, diagnostic_tag
from soaklab.rl.wandb_sink import WandbSink

PROGRESS_EVERY_S = 2.0
TERMINAL_EVERY_S = 5.0



WAKE_S = 0.2  # the scalar writer re-checks its queue this often (see _write_loop)

class EpisodeStats:
    """Per-env running return/length; finished episodes feed rolling means."""

    def __init__(self, num_envs: int, window: int = 100) -> None:
        self.returns = torch.zeros(num_envs, dtype=torch.float64)
        self.lengths = torch.zeros(num_envs, dtype=torch.long)
        self.finished_returns: deque[float] = deque(maxlen=window)
        self.finished_lengths: deque[int] = deque(maxlen=window)
        self.step_reward = 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"returns": self.returns.clone(), "lengths": self.lengths.clone(),
                "finished_returns": list(self.finished_returns), "finished_lengths": list(self.finished_lengths),
                "step_reward": self.step_reward}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.returns.copy_(state["returns"])
        self.lengths.copy_(state["lengths"])
        self.finished_returns.clear()
        self.finished_returns.extend(state["finished_returns"])
        self.finished_lengths.clear()
        self.finished_lengths.extend(state["finished_lengths"])
        self.step_reward = float(state["step_reward"])

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


@dataclass
class PendingRow:
    iteration: int
    values: dict[str, float | None]  # host-side scalars of the iteration
    slot: int  # its row in the device buffers
    updated: bool  # whether an update ran (losses are logged only then)
    walltime: float  # when the iteration ended: the event's time, though it is written later


class DeviceLog:
    """Device rows of the last `interval` iterations: rewards, dones and the agent's diagnostics."""

    def __init__(self, interval: int, num_envs: int, diag_names: tuple[str, ...], device: torch.device) -> None:
        self.interval = interval
        self.diag_names = diag_names
        self.rewards = torch.zeros(interval, num_envs, device=device)
        self.dones = torch.zeros(interval, num_envs, dtype=torch.bool, device=device)
        self.diag = torch.zeros(interval, max(len(diag_names), 1), device=device)
        self.pending: list[PendingRow] = []

    def record(self, iteration: int, rewards: torch.Tensor, dones: torch.Tensor, diagnostics: torch.Tensor,
               updated: bool, values: dict[str, float | None]) -> None:
        slot = len(self.pending)
        self.rewards[slot].copy_(rewards)
        self.dones[slot].copy_(dones)
        if updated:
            self.diag[slot, : diagnostics.numel()].copy_(diagnostics)
        self.pending.append(PendingRow(iteration, values, slot, updated, time.time()))

    @property
    def full(self) -> bool:
        return len(self.pending) >= self.interval

    def drain(self, stats: EpisodeStats) -> list[tuple[int, float, dict[str, float | None]]]:
        """Read the buffered rows back (one synchronisation), feed the episode statistics in
        order, and return each iteration's complete scalar set."""
        if not self.pending:
            return []
        k = len(self.pending)
        rewards, dones, diag = self.rewards[:k].cpu(), self.dones[:k].cpu(), self.diag[:k].cpu()
        out = []
        for row in self.pending:
            stats.observe(rewards[row.slot], dones[row.slot])
            values = dict(row.values)
            values["Train/mean_reward"] = stats.mean_return
            values["Train/episode_length"] = stats.mean_length
            values["Train/step_reward"] = stats.step_reward
            if row.updated:
                for name, value in zip(self.diag_names, diag[row.slot].tolist(), strict=False):
                    if not math.isnan(value):  # NaN: no update has produced this scalar yet
                        values[diagnostic_tag(name)] = value
            out.append((row.iteration, row.walltime, values))
        self.pending.clear()
        return out


# While the writer thread has work, a training loop thread waking from a semaphore waits at most
# this long for the GIL (CPython's default, 5 ms, would be half an iteration on a GPU).
SWITCH_INTERVAL_S = 2e-4


class RunLogger:
    """Scalars go to TensorBoard from a writer thread: a logging interval's worth of rows (a few
    thousand add_scalar calls) is written while the training loop waits on the GPU and the
    collector, not in between its iterations."""

    def __init__(self, run_dir: Path, max_iterations: int, identity: dict[str, str] | None = None,
                 run_config: dict[str, Any] | None = None, resuming: bool = False,
                 wandb: WandbSink | None = None, kill_midway_carry: bool = False) -> None:
        from torch.utils.tensorboard import SummaryWriter

        from soaklab.rl.event_carry import EVENTS_GLOB

        self.run_dir = run_dir
        # A resumed run keeps one event file: the one event file there (rl.event_carry has left it
        # holding exactly the rows the resume keeps) is copied into the new one, which is synced
        # before the old file is removed (a kill in between: rl.event_carry.prepare recovers).
        carried = sorted(run_dir.glob(EVENTS_GLOB)) if resuming else []
        self.writer = SummaryWriter(log_dir=str(run_dir), flush_secs=5)
        if carried:
            self._carry(carried[0], kill_midway_carry)
            identity = run_config = None  # carried with the rest
        if identity is not None:  # binds the event file to its run (checked by `soaklab validate`)
            self.writer.add_text(IDENTITY_TAG, json.dumps(identity, sort_keys=True), 0)
        if run_config is not None:  # TensorBoard's text tab shows what the run was (Markdown: a code block)
            self.writer.add_text(RUN_CONFIG_TAG, "```json\n" + json.dumps(run_config, indent=2) + "\n```", 0)
        self.wandb = wandb  # the same rows, written by the same thread after TensorBoard's
        self.max_iterations = max_iterations
        self.start = time.monotonic()
        self._last_progress = 0.0
        self._last_terminal = 0.0
        self._queue: queue.Queue[tuple[dict[str, float | None], int, float | None] | None] = queue.Queue()
        self._error: BaseException | None = None
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._write_loop, name="soaklab-scalars", daemon=True)
        self._thread.start()

    def _carry(self, old: Path, kill_midway: bool) -> None:
        """Step 3 of a resume's carry (soaklab.rl.event_carry). `kill_midway`: the test hook
        SOAKLAB_FAULT=kill_carry@<k> (soaklab.rl.faults), half the records copied and on disk."""
        from tensorboard.compat.proto.event_pb2 import Event

        from soaklab.metrics.events import record_bodies
        from soaklab.rl.event_carry import EVENTS_GLOB, sync_dir

        writer = self.writer._get_file_writer()
        events = [e for e in map(Event.FromString, record_bodies(old)) if not e.HasField("file_version")]
        for i, event in enumerate(events):
            if kill_midway and i == len(events) // 2:
                self.writer.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            writer.add_event(event, walltime=event.wall_time)  # else the writer stamps it now
        self.writer.flush()
        for new in set(self.run_dir.glob(EVENTS_GLOB)) - {old}:
            fd = os.open(new, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        old.unlink()
        sync_dir(self.run_dir)

    def scalars(self, values: dict[str, float | None], step: int, walltime: float | None = None) -> None:
        if self._error is not None:
            raise RuntimeError(f"TensorBoard writer failed: {self._error}") from self._error
        self._queue.put((values, step, walltime))

    def _write_loop(self) -> None:
        while True:
            # A bounded wait, re-checking the queue: the learner's cancellation is raised by a signal
            # handler wherever the main thread is, and when that is inside put()'s notify the wake-up
            # is lost; an unbounded get() then strands this thread and close() joins it forever
            # (seen: 1 run in about 70 cancelled at random moments).
            try:
                item = self._queue.get(timeout=WAKE_S)
            except queue.Empty:
                continue
            if item is None:
                self._queue.task_done()
                break
            values, step, walltime = item
            try:
                for tag, value in values.items():
                    if value is not None:
                        self.writer.add_scalar(tag, value, step, walltime=walltime)
            except BaseException as exc:  # surfaced by the next scalars() or close()
                self._error = exc
            finally:
                if self.wandb is not None:
                    self.wandb.log(values, step)  # never raises: a failing W&B stops itself, says why
                self._queue.task_done()

    def sync(self) -> None:
        """Every row queued so far written and flushed to the event file (a checkpoint's rows)."""
        self._queue.join()
        self.writer.flush()
        if self._error is not None:
            raise RuntimeError(f"TensorBoard writer failed: {self._error}") from self._error

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

    def states(self) -> dict[str, Any]:
        """The run summary's `loggers`: each logger's state, and for W&B where its run is."""
        states: dict[str, Any] = {"tensorboard": {"state": "stopped" if self._error else "ok",
                                                  "reason": None if self._error is None else str(self._error)}}
        if self.wandb is not None:
            states["wandb"] = self.wandb.state()
        return states

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        if self.wandb is not None:
            self.wandb.finish()
        self.writer.flush()
        self.writer.close()
        if self._error is not None:
            raise RuntimeError(f"TensorBoard writer failed: {self._error}") from self._error


class SilentLogger:
    """What a data-parallel rank other than 0 logs: nothing (no terminal lines, no event file, no
    progress.json); rank 0 logs the scalars of all ranks combined."""

    def scalars(self, values: dict[str, float | None], step: int, walltime: float | None = None) -> None:
        pass

    def progress(self, iteration: int, env_steps: int, force: bool = False) -> None:
        pass

    def sync(self) -> None:
        pass

    def terminal(self, iteration: int, fps: float, reward: float | None, length: float | None,
                 force: bool = False) -> None:
        pass

    def states(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass
