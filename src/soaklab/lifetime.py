"""Process lifetime ties: a child that must not outlive the process that started it.

Linux delivers a chosen signal to a process when its parent dies (`PR_SET_PDEATHSIG`), whatever
killed the parent, SIGKILL included. The collector takes SIGKILL at its learner's death; the
trainer takes SIGTERM at its monitor's death, so it still shuts down cleanly and writes its run
summary. `CANCEL_SIGNALS` are the signals every soaklab process treats as "stop now, cleanly".
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable
from multiprocessing.process import BaseProcess

PR_SET_PDEATHSIG = 1
# SIGHUP (a closed terminal or ssh session) ends a run the way SIGTERM does.
CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def set_parent_death_signal(sig: int, parent_pid: int | None = None) -> None:
    """Ask Linux to send `sig` to this process when its parent dies (no-op where unsupported). With
    `parent_pid`, a parent already gone before the request took effect is caught too."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig))
    except OSError:
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)


def die_with_parent(sig: int) -> Callable[[], None]:
    """A `preexec_fn` for subprocess.Popen: the child gets `sig` when this process dies."""
    parent = os.getpid()
    return lambda: set_parent_death_signal(sig, parent)


def end_process(proc: BaseProcess, timeout_s: float) -> None:
    """Wait for a child we asked to stop; then SIGTERM it; then SIGKILL it, each wait `timeout_s`."""
    proc.join(timeout_s)
    if proc.is_alive():
        proc.terminate()
        proc.join(timeout_s)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout_s)
