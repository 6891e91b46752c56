"""A training run bounded by wall-clock minutes, the way the learning benchmarks run them: the
trainer's own budget (training.max_wall_minutes) ends it `completed`, stop reason `time_budget`,
after a whole iteration and its final checkpoint. A signal is only the last resort for a trainer
that overruns its budget by far (a hang), and then the run says `failed`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import IO

# How long past its budget a trainer may take to finish its iteration, shut down and write its
# summary before it is taken for hung: startup (spawn, compile, warm-up) is inside the budget.
OVERRUN_S = 600.0


def budget_override(minutes: float) -> str:
    return f"training.max_wall_minutes={minutes:g}"


def run_budgeted(cmd: list[str], minutes: float, stdout: int | IO[str] | None = None) -> int:
    """Run the `soaklab train` command `cmd` (which carries budget_override(minutes)) to its end;
    its exit code. Past the budget by OVERRUN_S, SIGTERM, which the trainer records as a cancellation."""
    assert budget_override(minutes) in cmd, "the budget is the trainer's: pass budget_override(minutes)"
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=stdout,
                            stderr=subprocess.STDOUT if stdout is not None else None)
    deadline = time.monotonic() + minutes * 60 + OVERRUN_S
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(2)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    return proc.wait(timeout=300)
