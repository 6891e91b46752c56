"""The learner's one collector process: spawned (under its MPS thread share), waited for until its
first observations, stopped through the shared control block, and recorded as it ended; with the
file its backend diagnostics come back through (docs/runtime.md, "Processes")."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Callable
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from soaklab.files.jsonfiles import read_json
from soaklab.host.lifetime import end_process
from soaklab.rl.channels import C, PeerDied
from soaklab.rl.collector import CollectorSpec, collector_main

JOIN_TIMEOUT_S = 5.0
READY_TIMEOUT_S = 900.0  # the first compile of the task terms can take minutes on a cold cache


def diagnostics_path(run_dir: Path, rank_index: int) -> Path:
    """Rank 0's collector writes backend_diagnostics.json into the run dir; another rank's goes to a
    temp file its learner reads into its report and removes (ranks > 0 write no run files)."""
    if rank_index == 0:
        return run_dir / "backend_diagnostics.json"
    return Path(tempfile.gettempdir()) / f"soaklab-rank{rank_index}-{os.getpid()}-backend.json"


def non_finite_path(run_dir: Path, rank_index: int) -> Path:
    """Where a collector reports the first non-finite value it saw (soaklab.rl.finite), for its
    learner to name after the collector has exited: the run dir's non_finite.json on rank 0."""
    if rank_index == 0:
        return run_dir / "non_finite.json"
    return Path(tempfile.gettempdir()) / f"soaklab-rank{rank_index}-{os.getpid()}-non_finite.json"


class CollectorProcess:
    """One collector, from spawn to its exit record."""

    def __init__(self, ctx: BaseContext, spec: CollectorSpec) -> None:
        self.proc = ctx.Process(target=collector_main, args=(spec,), name="soaklab-collector", daemon=False)

    def start(self, mps: Any = None) -> None:
        """`mps`: the run's MPS selection, whose collector share the child inherits at spawn."""
        with mps.collector_environment() if mps is not None else contextlib.nullcontext():
            self.proc.start()

    def alive(self) -> bool:
        return self.proc.is_alive()

    def wait_ready(self, control: Any, poll: Callable[[], bool], watch: Callable[[], None]) -> None:
        """Until the collector's first observations: `poll` is the learner's safe point (False once the
        collector is gone), `watch` checks the other ranks."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not control[C.READY]:
            if not poll():
                raise PeerDied("collector exited during startup")
            watch()
            if time.monotonic() > deadline:
                raise TimeoutError(f"collector not ready after {READY_TIMEOUT_S:.0f}s")
            time.sleep(0.05)

    def record(self) -> dict[str, Any]:
        code = self.proc.exitcode
        sig = signal.Signals(-code).name if code is not None and code < 0 else None
        return {"pid": self.proc.pid, "alive": self.proc.is_alive(), "exitcode": code, "signal": sig}

    def join(self) -> None:
        end_process(self.proc, JOIN_TIMEOUT_S)


NO_COLLECTOR = {"pid": None, "alive": False, "exitcode": None, "signal": None}


def read_backend_diagnostics(path: Path, sim: str, keep_file: bool) -> dict[str, Any]:
    """What the collector reported of its backend (`path`: diagnostics_path); a rank > 0's temp file
    is removed once read."""
    if path.is_file():
        diagnostics = read_json(path)
        if not keep_file:
            path.unlink()
        return diagnostics
    return {"available": False, "backend_type": sim,
            "unavailable_reason": "the collector exited before reporting its backend"}


def stop_collector(control: Any, handles: Any, collector: CollectorProcess | None) -> None:
    """Ask the collector to stop, wake every wait it may be in, and join it (ending it if it must)."""
    if control is not None:
        control[C.STOP] = 1
    if handles is not None:
        for sem in handles.act_ready:
            sem.release()
        handles.ingress_free.release()
    if collector is not None:
        collector.join()


def process_sharing_evidence(resolved: Any, device: Any) -> dict[str, Any] | None:
    """With mps requested, prove (now that the learner's CUDA context exists) that it runs through the
    selected daemon, before the collector is spawned; a CUDA run without it records what it saw.
    `resolved`: the run's ResolvedRun; `device`: the learner's torch device."""
    from soaklab.mps.client import ambient_evidence, sharing_evidence

    devices = resolved.devices
    if resolved.mps is not None:
        return sharing_evidence(resolved.mps, devices.learner, devices.carrier)
    if device.type == "cuda":
        return ambient_evidence(devices.learner, devices.carrier)
    return None
