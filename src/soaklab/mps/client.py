"""A trainer's side of CUDA MPS: pick the daemon before CUDA starts, then prove it was used (docs/mps.md).

With `training.cuda_process_sharing=mps` the trainer takes an explicit
CUDA_MPS_PIPE_DIRECTORY if the caller set one, else the single live
soaklab-recorded daemon serving its GPU, or fails closed before anything is
built, pointing at `soaklab mps start`. The selection must be applied to the
environment before this process creates a CUDA context (the driver reads it
then); the spawned collector inherits it. After the learner's context exists,
the control daemon's server list is the evidence the manifest records.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soaklab.errors import InvalidInput, RuntimeFailure, SettingError
from soaklab.mps.daemon import find_control_pid, server_pids
from soaklab.mps.gpus import query_gpus
from soaklab.mps.ownership import CONTROL_SOCKET, is_socket, live_records

if TYPE_CHECKING:
    from soaklab.config.resolve import ResolvedRun

KEY = "training.cuda_process_sharing"
PIPE_ENV, LOG_ENV = "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"
# The share of the GPU's threads (multiprocessors) one client's kernels may occupy; the driver reads
# it when the process initialises CUDA, so each process takes its own before its first CUDA call.
THREADS_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
DEFAULT_PIPE_DIR = "/tmp/nvidia-mps"  # the driver's default when CUDA_MPS_PIPE_DIRECTORY is unset


@dataclass(frozen=True)
class MpsSelection:
    source: str  # "CUDA_MPS_PIPE_DIRECTORY" (explicit) or "soaklab record"
    pipe_dir: str
    log_dir: str | None
    daemon: str | None
    gpu_uuids: tuple[str, ...]
    control_pid: int | None
    learner_threads: int | None = None  # training.mps_learner_thread_percentage
    collector_threads: int | None = None  # training.mps_collector_thread_percentage

    @property
    def control_pipe(self) -> str:
        return str(Path(self.pipe_dir) / CONTROL_SOCKET)

    def apply(self) -> None:
        """Point this process (and the collector it spawns) at the daemon; before any CUDA call."""
        os.environ[PIPE_ENV] = self.pipe_dir
        if self.log_dir:
            os.environ[LOG_ENV] = self.log_dir
        set_threads(self.learner_threads)

    @contextmanager
    def collector_environment(self) -> Iterator[None]:
        """Around the collector's spawn: the child starts with the collector's thread share (it
        inherits the environment at spawn), this process keeps the learner's."""
        set_threads(self.collector_threads)
        try:
            yield
        finally:
            set_threads(self.learner_threads)


def set_threads(percentage: int | None) -> None:
    if percentage is None:
        os.environ.pop(THREADS_ENV, None)
    else:
        os.environ[THREADS_ENV] = str(percentage)


def learner_ordinal(request: Any) -> int:
    """The CUDA ordinal `training.device` asks for (cuda -> the current device, 0 before CUDA starts)."""
    text = str(request)
    return int(text.split(":", 1)[1]) if text.startswith("cuda:") and text[5:].isdigit() else 0


def select_daemon(device_request: Any) -> MpsSelection:
    explicit = os.environ.get(PIPE_ENV)
    if explicit:
        if not is_socket(Path(explicit) / CONTROL_SOCKET):
            raise InvalidInput(f"{PIPE_ENV}={explicit}: no MPS control socket there; start a daemon with "
                               "`soaklab mps start` and use `soaklab mps env`, or unset it")
        return MpsSelection(PIPE_ENV, explicit, os.environ.get(LOG_ENV), None, (), find_control_pid(explicit))
    gpus = query_gpus()
    ordinal = learner_ordinal(device_request)
    if ordinal >= len(gpus):
        raise SettingError("training.device", device_request, f"{len(gpus)} GPU(s) visible to this process")
    gpu = gpus[ordinal]
    live = live_records(gpu.uuid)
    if not live:
        raise SettingError(KEY, "mps", f"no live soaklab-recorded MPS daemon serves GPU {gpu.index} ({gpu.uuid}); "
                           f"run `soaklab mps start` first, or set {PIPE_ENV}")
    if len(live) > 1:
        names = ", ".join(r.name for r in live)
        raise SettingError(KEY, "mps", f"{len(live)} live daemons serve {gpu.uuid} ({names}); "
                           f"choose one with `eval $(soaklab mps env --name NAME)`")
    r = live[0]
    return MpsSelection("soaklab record", r.pipe_dir, r.log_dir, r.name, r.gpu_uuids, r.control_pid)


def sharing_evidence(selection: MpsSelection, learner: str, collector: str) -> dict[str, Any]:
    """Called once the learner's CUDA context exists: the daemon must list a server by now."""
    try:
        servers = server_pids(selection.pipe_dir)
    except RuntimeFailure as exc:
        raise RuntimeFailure(f"{KEY}=mps: the daemon on {selection.control_pipe} did not answer: {exc}") from None
    if not servers:
        raise RuntimeFailure(f"{KEY}=mps: no MPS server runs behind {selection.control_pipe} although the learner's "
                             "CUDA context exists; the learner is not an MPS client")
    return {
        "configured": "mps",
        "effective": "mps",
        "source": selection.source,
        "daemon": selection.daemon,
        "learner_device": learner,
        "collector_device": collector,
        "gpu_uuids": list(selection.gpu_uuids),
        "pipe_directory": selection.pipe_dir,
        "control_pipe": selection.control_pipe,
        "control_pipe_type": "unix_socket",
        "control_pid": selection.control_pid,
        "server_pids": servers,
        "validated": True,
    }


def ambient_evidence(learner: str, collector: str) -> dict[str, Any]:
    """A CUDA run without the setting still records whether it went through MPS; never fails."""
    raw = os.environ.get(PIPE_ENV)
    pipe_dir = raw or DEFAULT_PIPE_DIR
    control = Path(pipe_dir) / CONTROL_SOCKET
    servers: list[int] | None = None
    if is_socket(control):
        try:
            servers = server_pids(pipe_dir)
        except (RuntimeFailure, InvalidInput, OSError):
            servers = None
    return {
        "configured": None,
        "effective": "mps" if servers else None,
        "learner_device": learner,
        "collector_device": collector,
        "pipe_directory_env": raw,
        "pipe_directory": pipe_dir,
        "control_pipe_type": "unix_socket" if is_socket(control) else "missing",
        "server_pids": servers,
        "ambient_server": bool(servers),
    }


def select_for_run(resolved: ResolvedRun, apply: bool) -> ResolvedRun:
    """Pick the MPS daemon a run with cuda_process_sharing=mps uses (resolution already refused mps
    anywhere it cannot work); `apply` points this process, and what it spawns, at it. Before any
    CUDA call: the driver reads the choice when the context is created."""
    training = resolved.run.training
    if resolved.run.training.cuda_process_sharing != "mps":
        return resolved
    selection = replace(select_daemon(training.device),
                        learner_threads=training.mps_learner_thread_percentage,
                        collector_threads=training.mps_collector_thread_percentage)
    if apply:
        selection.apply()
    return replace(resolved, mps=selection)
