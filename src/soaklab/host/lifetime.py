"""Process lifetime ties: a child that must not outlive the process that started it.

Linux delivers a chosen signal to a process when its parent dies (`PR_SET_PDEATHSIG`), whatever
killed the parent, SIGKILL included. The collector takes SIGKILL at its learner's death; the
trainer takes SIGTERM at its monitor's death, so it still shuts down cleanly and writes its run
summary. `CANCEL_SIGNALS` are the signals every soaklab process treats as "stop now, cleanly";
SIGUSR1 asks a trainer, a data-parallel rank or a collector for its threads' stacks, nothing else.
"""

from __future__ import annotations

import ctypes
import multiprocessing.util
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


def dump_stacks_on_signal(sig: int = signal.SIGUSR1) -> None:
    """`kill -USR1 PID` prints every thread's Python stack to this process's stderr, and the process
    goes on: what a run that seems stuck is waiting in, without stopping it (docs/troubleshooting.md)."""
    import faulthandler
    import sys

    faulthandler.register(sig, file=sys.stderr, all_threads=True, chain=False)


def leave(code: int) -> None:
    """End a worker process (a collector, a stuck rank) with `code`, skipping the interpreter's
    teardown (CUDA IPC references and NCCL state must not be garbage-collected here) but running
    multiprocessing's exit finalizers first: they unlink and unregister every named semaphore this
    process made. A library may make one behind our back (torch.compile's FX interpreter builds a tqdm
    progress bar, whose class lock is a multiprocessing RLock); skipped, the resource tracker warns
    "There appear to be 1 leaked semaphore objects" at the end of every GPU run."""
    multiprocessing.util._run_finalizers(0)
    exit_now(code)


def exit_now(code: int) -> None:
    """End this process with `code` without the interpreter's teardown, once everything of the run is
    written and its children are gone. A data-parallel NCCL rank whose peer died has a collective
    kernel on its GPU that will never complete (the peer is gone); the teardown's garbage collection
    frees CUDA memory behind it and blocks until NCCL's watchdog aborts the process: measured 60 s and
    SIGABRT after a correct summary (benchmarks/archive/gpu/dp-x2/failure/). The driver ends the kernel with
    the process."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it anyway
            pass
    os._exit(code)
