"""What the learner logs (docs/loggers.md): rank 0's RunLogger (the terminal, TensorBoard and
progress.json, with W&B beside them when `training.loggers` names it), a SilentLogger on every
other rank; the device rows of the iterations since the last flush; each iteration's host-side
scalars. With several ranks, a flush first combines each iteration's scalars over the ranks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from soaklab.contract.sections import RunConfig
from soaklab.metrics.tags import ITERATION_TAG, SUMMED_OVER_RANKS, diagnostic_tag
from soaklab.rl.channels import C
from soaklab.rl.diverged import UNSTABLE_TAG
from soaklab.rl.dp import DataParallel
from soaklab.rl.guards import Guards
from soaklab.rl.logging import DeviceLog, EpisodeStats, RunLogger, SilentLogger
from soaklab.rl.timing import PhaseTimer
from soaklab.rl.wandb_sink import sink_for_run

Rows = list[tuple[int, float, dict[str, float | None]]]  # (iteration, walltime, scalars), in order


class LearnerLog:
    """The learner's logging part: open() picks the loggers, begin() starts the loop's timing,
    record() buffers an iteration's row, flush() writes the buffered rows."""

    def __init__(self, logger: RunLogger | SilentLogger, num_envs: int, world_size: int) -> None:
        self.logger, self.num_envs, self.world_size = logger, num_envs, world_size
        self.device_log: DeviceLog | None = None  # once the training loop starts
        self.final_fps = 0.0  # the last iteration's env steps per second, on this rank
        self.metric_names: tuple[str, ...] = ()
        self.last_counters: np.ndarray | None = None  # the control block at the end of the previous iteration
        self.mark = 0.0  # when the previous iteration ended (time.perf_counter())

    @classmethod
    def open(cls, run_dir: Path, record: dict[str, Any], run: RunConfig, main: bool, resumed_at: int | None,
             kill_carry: bool, num_envs: int, world_size: int) -> LearnerLog:
        """Rank 0 alone writes the terminal, TensorBoard and progress.json. `resumed_at`: the
        iteration a resumed run continues from (its event file is carried, its W&B run is new)."""
        training = run.training
        logger = (RunLogger(run_dir, run.algo.max_iterations,
                            {"config_hash": record["config_hash"], "run_dir": str(run_dir)}, record,
                            resuming=resumed_at is not None,
                            wandb=sink_for_run(run_dir, training.loggers, training.wandb_project, record, resumed_at),
                            kill_midway_carry=kill_carry)
                  if main else SilentLogger())
        return cls(logger, num_envs, world_size)

    def begin(self, interval: int, diag_names: tuple[str, ...], device: torch.device, metric_names: tuple[str, ...],
              control: np.ndarray) -> None:
        """The training loop starts: its first iteration is timed from here."""
        self.device_log = DeviceLog(interval, self.num_envs, diag_names, device)
        self.metric_names = metric_names
        self.last_counters = control.copy()
        self.mark = time.perf_counter()

    @property
    def full(self) -> bool:
        """A logging interval's rows are buffered: time to flush."""
        return self.device_log is not None and self.device_log.full

    def record(self, it: int, rewards: torch.Tensor, dones: torch.Tensor, diagnostics: torch.Tensor, updated: bool,
               update_rows: int, timer: PhaseTimer, control: np.ndarray, metrics: np.ndarray, replay_size: int) -> None:
        """Iteration `it`'s row: its device values buffered, its host scalars with them. One loop period,
        from the same point of the previous iteration: logging and checkpoints are part of what an
        iteration costs."""
        assert self.device_log is not None
        now = time.perf_counter()
        iteration_s, self.mark = now - self.mark, now
        self.final_fps = self.num_envs / max(iteration_s, 1e-9)
        values = host_scalars(iteration_s, self.final_fps, timer.take(), control, self.last_counters, metrics,
                              self.metric_names, replay_size)
        values["Replay/update_rows"] = float(update_rows)
        self.device_log.record(it, rewards, dones, diagnostics, updated, values)

    def iteration_done(self, iteration: int, env_steps: int, control: np.ndarray) -> None:
        """progress.json; the next iteration's counters are taken from here."""
        self.progress(iteration, env_steps)
        self.last_counters = control.copy()

    def flush(self, stats: EpisodeStats, dp: DataParallel | None, device: torch.device, guards: Guards | None) -> None:
        """Write the buffered iterations. `guards` (None while shutting down: a failure already drained
        them, and a cancellation stands) read their flags with the rows (one device read more per flush,
        none per step) and judge the rows once written, so the event file holds what they name."""
        if guards is not None:
            guards.drain()
        rows = self.write(stats, dp, device)
        if guards is not None:
            guards.logged(rows, stats)
        self.rate(rows, stats)

    def write(self, stats: EpisodeStats, dp: DataParallel | None, device: torch.device) -> Rows:
        """The buffered rows read back (one device read for all of them), combined over the ranks
        when `dp` is given (every rank flushes at the same iterations), and written."""
        assert self.device_log is not None
        rows = self.device_log.drain(stats)
        if dp is not None and rows:
            keys = sorted(set().union(*(values for _, _, values in rows))
                          | {diagnostic_tag(name) for name in self.device_log.diag_names})
            merged = dp.reduce_rows([values for _, _, values in rows], keys, SUMMED_OVER_RANKS, device)
            rows = [(it, walltime, values) for (it, walltime, _), values in zip(rows, merged, strict=True)]
        for it, walltime, values in rows:
            self.logger.scalars(values, it, walltime)
        return rows

    def rate(self, rows: Rows, stats: EpisodeStats) -> None:
        """The terminal line: the rate over the flushed iterations (one iteration's rate swings with the
        flush itself)."""
        if rows:
            seconds = sum(values[ITERATION_TAG] or 0.0 for _, _, values in rows) / 1e3
            fps = self.num_envs * self.world_size * len(rows) / max(seconds, 1e-9)
            self.logger.terminal(rows[-1][0] + 1, fps, stats.mean_return, stats.mean_length)

    def progress(self, iteration: int, env_steps: int, force: bool = False) -> None:
        """progress.json, with the env steps of all ranks."""
        self.logger.progress(iteration, env_steps * self.world_size, force=force)

    def last_line(self, iteration: int, stats: EpisodeStats) -> None:
        self.logger.terminal(iteration, self.final_fps * self.world_size, stats.mean_return, stats.mean_length,
                             force=True)


def host_scalars(iteration_s: float, fps: float, phases_ms: dict[str, float], ctl: np.ndarray, last: np.ndarray,
                 metrics: np.ndarray, metric_names: tuple[str, ...], replay_size: int) -> dict[str, float | None]:
    """The iteration's scalars known on the host. Phase times are GPU time on a CUDA learner,
    read when finished (so possibly an iteration late). `ctl` and `last`: the control block now and
    at the end of the previous iteration; `metrics`: the collector's metric row."""
    def delta_ms(index: C) -> float:
        return float(ctl[index] - last[index]) / 1e6

    values: dict[str, float | None] = {
        ITERATION_TAG: iteration_s * 1e3,
        "Perf/total_fps": fps,
        "Perf/learner_inference_ms": phases_ms.get("inference", 0.0),
        "Perf/learner_ingress_ms": phases_ms.get("ingress", 0.0),
        "Perf/learner_update_ms": phases_ms.get("update", 0.0),
        "Perf/collector_env_step_ms": delta_ms(C.ENV_STEP_NS),
        "Perf/collector_action_wait_ms": delta_ms(C.ACTION_WAIT_NS),
        "Perf/collector_ingress_write_ms": delta_ms(C.INGRESS_WRITE_NS),
        "Replay/size": float(replay_size),
        "Ingress/occupancy": float(ctl[C.INGRESS_PUBLISHED] - ctl[C.INGRESS_RELEASED]),
        "Ingress/high_water_occupancy": float(ctl[C.HIGH_WATER]),
        "Ingress/backpressure_waits": float(ctl[C.BACKPRESSURE_WAITS]),
        UNSTABLE_TAG: float(ctl[C.PHYSICS_UNSTABLE] - last[C.PHYSICS_UNSTABLE]),
    }
    names = metric_names
    for i, name in enumerate(names):
        values[f"Train/{name}"] = float(metrics[i])
    # Of the episodes that ended: the share that ran to the time limit or the clip's end.
    ended = float(metrics[names.index("episodes/terminated")] + metrics[names.index("episodes/truncated")])
    values["Train/timeout_fraction"] = (float(metrics[names.index("episodes/truncated")]) / ended
                                        if ended > 0 else None)
    return values
