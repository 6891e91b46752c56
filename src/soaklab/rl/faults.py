"""Fault injection for tests (docs/runtime.md): SOAKLAB_FAULT=<fault>@<iteration>[:<rank>].

The fault fires in one data-parallel rank: the one named, else rank 0 (a single-rank run's only one).

Faults are injected into the real trainer so soak tests drive the real runtime.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from soaklab.errors import InvalidInput

FAULT_ENV = "SOAKLAB_FAULT"
FAULTS = ("hang_startup", "hang_collector_ready", "hang_learner", "hang_collector", "kill_collector", "raise_learner",
          "leak_child", "nan_reward", "kill_learner", "sigterm_learner",
          # SIGKILL at a step of a resume at iteration <k> (docs/runtime.md, "Resuming a run"): with the
          # carried events under their temporary name, half copied into the new event file, the
          # checkpoint half loaded, and right after the resumed segment's record.
          "kill_carry_tmp", "kill_carry", "kill_checkpoint_load", "kill_segment")


@dataclass(frozen=True)
class Fault:
    name: str
    iteration: int
    rank: int = 0

    def due(self, name: str, iteration: int) -> bool:
        return self.name == name and iteration == self.iteration

    def fire_in_learner(self, it: int) -> None:
        """The learner's faults, at the start of its iteration `it`."""
        if self.due("raise_learner", it):
            raise RuntimeError(f"injected learner fault at iteration {it}")
        if self.due("hang_learner", it):
            while True:  # no progress is written from here on: the monitor must notice
                time.sleep(1.0)
        if self.due("leak_child", it):
            leak_child()
        if self.due("kill_learner", it):  # no shutdown at all: what a resume must recover from
            os.kill(os.getpid(), signal.SIGKILL)
        if self.due("sigterm_learner", it):  # a real SIGTERM, as a scheduler's preemption sends one
            os.kill(os.getpid(), signal.SIGTERM)


def leak_child() -> None:
    """Leave a detached child behind, as a buggy runtime would."""
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def fault_from_env() -> Fault | None:
    text = os.environ.get(FAULT_ENV, "").strip()
    if not text:
        return None
    name, sep, at = text.partition("@")
    at, colon, rank = at.partition(":")
    if name not in FAULTS or not sep or not at.isdigit() or (colon and not rank.isdigit()):
        raise InvalidInput(f"{FAULT_ENV}={text}: expected <fault>@<iteration>[:<rank>] with fault in "
                           f"{', '.join(FAULTS)}")
    return Fault(name, int(at), int(rank) if colon else 0)
