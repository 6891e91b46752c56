"""The wall-clock budget of a run (`training.max_wall_minutes`, docs/runtime.md).

The budget counts the wall time of the iterations the run holds: a resumed run's earlier segments up
to its checkpoint (the `elapsed_s` its learner checkpoint carries), then this process from its launch.
Each policy checkpoint carries the same figure, so an evaluation says how long its policy trained.
It ends the run after a whole iteration, so the final checkpoint holds everything it trained on."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


def launched() -> float:
    """This process's launch on time.monotonic()'s scale: start-up, the env's spawn and compilation
    count towards a run's training time (a time-to-success figure is from launch)."""
    import psutil

    return time.monotonic() - max(0.0, time.time() - psutil.Process().create_time())


@dataclass(frozen=True)
class WallBudget:
    minutes: float | None  # training.max_wall_minutes (None: no budget)
    before_s: float = 0.0  # the wall time of the segments before this one, up to their checkpoint
    started: float = field(default_factory=lambda: launched())  # this process's launch, time.monotonic()

    def run_s(self) -> float:
        """This process's wall time so far."""
        return time.monotonic() - self.started

    def elapsed_s(self) -> float:
        """The run's training wall time so far (what the budget bounds)."""
        return self.before_s + time.monotonic() - self.started

    def spent(self) -> bool:
        return self.minutes is not None and self.elapsed_s() >= self.minutes * 60.0

    def stop_reason(self, iteration: int, max_iterations: int) -> str:
        """Why a training loop that ended at `iteration` stopped: max_iterations, or time_budget (said
        on the console)."""
        if iteration < max_iterations:
            print(f"train: time budget of {self.minutes:g} min spent at iteration {iteration} of {max_iterations}",
                  flush=True)
            return "time_budget"
        return "max_iterations"
