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


# 1 writes a per-step digest trace of the run into <run dir>/trace (soaklab.rl.trace, docs/determinism.md);
# SOAKLAB_TRACE_DUMP=N also saves step N's tensors whole.
TRACE_ENV = "SOAKLAB_TRACE"
TRACE_DUMP_ENV = "SOAKLAB_TRACE_DUMP"


def trace_settings() -> tuple[bool, int | None]:
    """(trace on, the step to dump or None): SOAKLAB_TRACE unset, 0 or 1, SOAKLAB_TRACE_DUMP unset or a
    step number; anything else is refused in one line (before anything is spawned)."""
    on = switch_off_by_default(TRACE_ENV, "no trace, the default", "trace into <run dir>/trace")
    dump = os.environ.get(TRACE_DUMP_ENV)
    if dump not in (None, "") and not dump.isdigit():
        raise InvalidInput(f"{TRACE_DUMP_ENV}={dump!r}: expected the step (an iteration, 0 or more) whose tensors "
                           "to save; or unset it")
    return on, int(dump) if dump else None


def switch_off_by_default(name: str, off: str, on: str) -> bool:
    """A 0/1 switch that is off unless set to 1; any other value is refused in one line naming both."""
    value = os.environ.get(name)
    if value not in (None, "", "0", "1"):
        raise InvalidInput(f"{name}={value!r}: expected 0 ({off}) or 1 ({on}); or unset it")
    return value == "1"
