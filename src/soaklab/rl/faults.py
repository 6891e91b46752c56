"""Fault injection for tests (docs/runtime.md): SOAKLAB_FAULT=<fault>@<iteration>.

Faults are injected into the real trainer so soak tests drive the real runtime.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from soaklab.errors import InvalidInput

FAULT_ENV = "SOAKLAB_FAULT"
FAULTS = ("hang_startup", "hang_collector_ready", "hang_learner", "hang_collector", "kill_collector", "raise_learner",
          "leak_child")


@dataclass(frozen=True)
class Fault:
    name: str
    iteration: int

    def due(self, name: str, iteration: int) -> bool:
        return self.name == name and iteration == self.iteration


def fault_from_env() -> Fault | None:
    text = os.environ.get(FAULT_ENV, "").strip()
    if not text:
        return None
    name, sep, at = text.partition("@")
    if name not in FAULTS or not sep or not at.isdigit():
        raise InvalidInput(f"{FAULT_ENV}={text}: expected <fault>@<iteration> with fault in {', '.join(FAULTS)}")
    return Fault(name, int(at))
