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
