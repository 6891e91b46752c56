"""Environment variables that steer a run beyond its config, checked before anything is spawned.

A leaf module: the configuration (which refuses a bad value) and the capture code (which reads it)
both import it.
"""

from __future__ import annotations

import os

from soaklab.errors import InvalidInput

# 0 keeps a CUDA learner eager (debugging); 1, the default, captures its update in a CUDA graph.
GRAPH_ENV = "SOAKLAB_LEARNER_CUDA_GRAPH"


def check_graph_env() -> None:
    """SOAKLAB_LEARNER_CUDA_GRAPH is unset, 0 or 1; anything else is refused (before spawning)."""
    switch(GRAPH_ENV, "eager learner", "captured, the default")


def switch(name: str, off: str, on: str) -> bool:
    """A 0/1 switch that is on unless set to 0; any other value is refused in one line naming both."""
    value = os.environ.get(name)
    if value is not None and value not in ("0", "1"):
        raise InvalidInput(f"{name}={value!r}: expected 0 ({off}) or 1 ({on}); or unset it")
    return value != "0"


# 0 leaves other learners' segments alone at a run's start (a host whose orphans someone studies, e.g.
# the test suite's deliberate ones); 1, the default, reclaims those of gone learners (soaklab.rl.shm).
RECLAIM_ENV = "SOAKLAB_SHM_RECLAIM_AT_START"


def reclaim_at_start_enabled() -> bool:
    """SOAKLAB_SHM_RECLAIM_AT_START is unset, 0 or 1; anything else is refused (before spawning)."""
    return switch(RECLAIM_ENV, "leave gone learners' segments to `soaklab shm reclaim`",
                  "reclaim them at a run's start, the default")
