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
    value = os.environ.get(GRAPH_ENV)
    if value is not None and value not in ("0", "1"):
        raise InvalidInput(f"{GRAPH_ENV}={value!r}: expected 0 (eager learner) or 1 (captured, the default); "
                           "or unset it")


# 0 leaves other learners' segments alone at a run's start (a host whose orphans someone studies, e.g.
# the test suite's deliberate ones); 1, the default, reclaims those of gone learners (soaklab.rl.shm).
RECLAIM_ENV = "SOAKLAB_SHM_RECLAIM_AT_START"


def reclaim_at_start_enabled() -> bool:
    """SOAKLAB_SHM_RECLAIM_AT_START is unset, 0 or 1; anything else is refused (before spawning)."""
    value = os.environ.get(RECLAIM_ENV)
    if value is not None and value not in ("0", "1"):
        raise InvalidInput(f"{RECLAIM_ENV}={value!r}: expected 0 (leave gone learners' segments to "
                           "`soaklab shm reclaim`) or 1 (reclaim them at a run's start, the default); or unset it")
    return value != "0"
