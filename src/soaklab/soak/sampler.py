"""One monitor sample: the trainer's process tree, its memory and file descriptors, run-dir progress."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from soaklab.files.jsonfiles import read_json
from soaklab.files.rundir import CONSOLE_LOG
from soaklab.soak import gpu

FD_CLASSES = ("eventfd", "shared_memory", "pipe", "socket", "other")


def fd_class(target: str) -> str:
    if target == "anon_inode:[eventfd]":
        return "eventfd"
    if target.startswith("/dev/shm/"):
        return "shared_memory"
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("socket:"):
        return "socket"
    return "other"


def count_fds(pid: int) -> dict[str, int]:
    counts = dict.fromkeys(FD_CLASSES, 0)
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(fd_dir)
    except OSError:  # gone, or not ours to read
        return counts
    for name in names:
        try:
            counts[fd_class(os.readlink(fd_dir / name))] += 1
        except OSError:  # closed between listdir and readlink
            continue
    return counts


@dataclass(frozen=True)
class ProcessKey:
    """A process identity that survives pid reuse: pid plus start time."""

    pid: int
    create_time: float

    def alive(self) -> bool:
        """Running, and not a zombie: an exited orphan stays a zombie where PID 1 does not reap."""
        try:
            proc = psutil.Process(self.pid)
            return proc.create_time() == self.create_time and proc.status() != psutil.STATUS_ZOMBIE
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False


def process_tree(root_pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(root_pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def session_members(sid: int) -> list[psutil.Process]:
    """Every live process of a session: what the trainer started, even if reparented to init."""
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (OSError, psutil.Error):
            continue
    return members


# /dev/shm names a soaklab trainer creates: its own segments, multiprocessing's named semaphores
# (spawn keeps them linked until the resource tracker, a child of the trainer, unlinks them) and
# shared_memory / torch defaults. Others (a CUDA MPS daemon's, say) are never touched.
SHM_PREFIXES = ("soaklab-", "sem.mp-", "psm_", "torch_")


def shm_names(pid: int) -> set[str]:
    """The /dev/shm entries of ours that `pid` has mapped or open (semaphores are mapped, segments
    may be either), read from /proc while the process lives."""
    found: set[str] = set()
    try:
        with open(f"/proc/{pid}/maps", errors="replace") as maps:
            for line in maps:
                at = line.find("/dev/shm/")
                if at >= 0:
                    found.add(line[at + len("/dev/shm/"):].strip().removesuffix(" (deleted)"))
    except OSError:  # gone, or not ours to read
        pass
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(fd_dir / fd)
            except OSError:
                continue
            if target.startswith("/dev/shm/"):
                found.add(target.removeprefix("/dev/shm/").removesuffix(" (deleted)"))
    except OSError:
        pass
    return {name for name in found if name.startswith(SHM_PREFIXES) and "/" not in name}


def remove_shm(names: set[str]) -> list[dict[str, Any]]:
    """Unlink each entry still present in /dev/shm; report every one found."""
    removed = []
    for name in sorted(names):
        path = Path("/dev/shm") / name
        if not path.exists():
            continue
        try:
            path.unlink()
            removed.append({"name": name, "removed": True, "error": None})
        except OSError as exc:
            removed.append({"name": name, "removed": False, "error": f"{type(exc).__name__}: {exc}"})
    return removed


def run_dir_progress(run_dir: Path) -> dict[str, Any]:
    """Files, bytes and the newest mtime of the trainer's own files (the console log excluded)."""
    files, size, newest = 0, 0, None
    if run_dir.is_dir():
        for path in run_dir.rglob("*"):
            try:
                st = path.stat()
            except OSError:  # an atomic rename happened under us
                continue
            if path.is_file() and path.name != CONSOLE_LOG:
                files += 1
                size += st.st_size
                newest = st.st_mtime if newest is None else max(newest, st.st_mtime)
    iteration = env_steps = None
    try:
        progress = read_json(run_dir / "progress.json")
        iteration, env_steps = int(progress["iteration"]), int(progress["env_steps"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return {"files": files, "bytes": size, "newest_mtime": newest, "iteration": iteration, "env_steps": env_steps}


def take_sample(root_pid: int, run_dir: Path, elapsed_s: float, with_gpu: bool,
                shm_seen: set[str] | None = None) -> dict[str, Any]:
    """One sample of the trainer's tree; `shm_seen` collects the /dev/shm entries its processes use."""
    procs, rss = [], 0
    fds = dict.fromkeys(FD_CLASSES, 0)
    gpu_used = gpu.memory_by_pid() if with_gpu else None
    gpu_bytes = 0 if gpu_used is not None else None
    for proc in process_tree(root_pid):
        try:
            with proc.oneshot():
                entry = {"pid": proc.pid, "create_time": proc.create_time(), "name": proc.name(),
                         "rss_bytes": proc.memory_info().rss}
        except psutil.Error:
            continue
        for cls, n in count_fds(proc.pid).items():
            fds[cls] += n
        if shm_seen is not None:
            shm_seen |= shm_names(proc.pid)
        if gpu_used is not None:
            entry["gpu_memory_bytes"] = gpu_used.get(proc.pid, 0)
            gpu_bytes += entry["gpu_memory_bytes"]
        rss += entry["rss_bytes"]
        procs.append(entry)
    return {"elapsed_s": round(elapsed_s, 3), "process_count": len(procs), "rss_bytes": rss, "fds": fds,
            "gpu_memory_bytes": gpu_bytes, "processes": procs, "progress": run_dir_progress(run_dir)}
