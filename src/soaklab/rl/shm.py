"""Named shared-memory arrays (docs/runtime.md).

The learner creates and unlinks every segment; the collector attaches by name.
Named `multiprocessing.shared_memory` segments live in /dev/shm, so a leak is
visible to the soak monitor. Both processes use the learner's resource
tracker (spawn children inherit it), so the collector attaching does not make
a second owner.

A segment's name carries its creator's pid namespace as well as its pid: a pid means nothing outside
its namespace, and /dev/shm is often shared across namespaces (a container with the host's IPC but its
own pids). Only segments made in this process's own namespace are judged gone or alive from here.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np

from soaklab.host.envvars import reclaim_at_start_enabled

SEGMENT_PREFIX = "soaklab"
SHM_DIR = Path("/dev/shm")
UNKNOWN_NAMESPACE = "unknown"
# What SharedArrays.create names: soaklab-ns<creator's pid namespace>-<creator's pid>-<token>-<array>.
SEGMENT_NAME = re.compile(rf"^{SEGMENT_PREFIX}-ns(?P<namespace>\d+|{UNKNOWN_NAMESPACE})-(?P<pid>[1-9]\d*)"
                          r"-[0-9a-f]{8}-[a-z_]+$")
# The names before they carried a namespace (soaklab-<pid>-<token>-<array>): never judged again.
LEGACY_NAME = re.compile(rf"^{SEGMENT_PREFIX}-\d+-[0-9a-f]{{8}}-[a-z_]+$")


def pid_namespace() -> str:
    """This process's pid namespace: the inode of /proc/self/ns/pid (what `ls -l` shows as
    pid:[N]), or "unknown" where it cannot be read; an unknown namespace is never judged."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return UNKNOWN_NAMESPACE


def segment_prefix(pid: int, namespace: str | None = None) -> str:
    """The start of every segment name a learner with this pid (in this namespace, ours by default) makes."""
    return f"{SEGMENT_PREFIX}-ns{namespace or pid_namespace()}-{pid}-"


@dataclass(frozen=True)
class ArraySpec:
    name: str  # segment name in /dev/shm
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


class SharedArrays:
    """A set of named arrays in shared memory, created by the owner or attached by a peer."""

    def __init__(self, specs: dict[str, ArraySpec], create: bool) -> None:
        self.specs = specs
        self.owner = create
        self._segments: dict[str, shared_memory.SharedMemory] = {}
        self.arrays: dict[str, np.ndarray] = {}
        try:
            for key, spec in specs.items():
                seg = shared_memory.SharedMemory(name=spec.name, create=create, size=max(spec.nbytes, 1))
                self._segments[key] = seg
                array = np.ndarray(spec.shape, dtype=spec.dtype, buffer=seg.buf)
                if create:
                    array.fill(0)
                self.arrays[key] = array
        except BaseException:
            self.close()
            raise

    @classmethod
    def create(cls, shapes: dict[str, tuple[tuple[int, ...], str]]) -> SharedArrays:
        token = f"{segment_prefix(os.getpid())}{secrets.token_hex(4)}"
        specs = {key: ArraySpec(f"{token}-{key}", tuple(shape), dtype) for key, (shape, dtype) in shapes.items()}
        return cls(specs, create=True)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    @property
    def names(self) -> list[str]:
        return [spec.name for spec in self.specs.values()]

    def close(self) -> list[str]:
        """Drop views and close segments; the owner also unlinks them. Returns cleanup errors."""
        errors: list[str] = []
        self.arrays.clear()
        for key, seg in list(self._segments.items()):
            try:
                seg.close()
            except Exception as exc:  # a still-exported view: record, keep going
                errors.append(f"close {key}: {type(exc).__name__}: {exc}")
            if self.owner:
                try:
                    seg.unlink()
                except FileNotFoundError:
                    pass
                except Exception as exc:
                    errors.append(f"unlink {key}: {type(exc).__name__}: {exc}")
        self._segments.clear()
        return errors


def leaked_segments(prefix: str = SEGMENT_PREFIX) -> list[str]:
    """soaklab segments present in /dev/shm (for tests and the monitor)."""
    try:
        return sorted(n for n in os.listdir("/dev/shm") if n.startswith(prefix))
    except FileNotFoundError:
        return []


def _alive(pid: int) -> bool:
    """Whether `pid` names a process in this pid namespace. A signal 0 asks the kernel in the caller's
    namespace; /proc (what psutil reads) may be another namespace's mount."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's, but there
    return True


def orphaned_segments(shm_dir: Path = SHM_DIR) -> list[str]:
    """soaklab segments whose creating learner is gone. A learner unlinks its segments on every exit it
    lives through, and its resource tracker after a SIGKILL; only a kill of both (a whole process tree
    killed at once: a session or a container ended) leaves them. Only segments made in this pid
    namespace are judged (unjudged_segments lists the others); names of another form are not soaklab's
    to judge and are never listed."""
    ours = pid_namespace()
    if ours == UNKNOWN_NAMESPACE:
        return []
    orphans = []
    for name in sorted(os.listdir(shm_dir)) if shm_dir.is_dir() else []:
        match = SEGMENT_NAME.match(name)
        if match and match["namespace"] == ours and not _alive(int(match["pid"])):
            orphans.append(name)
    return orphans


def unjudged_segments(shm_dir: Path = SHM_DIR) -> list[str]:
    """soaklab segments this process cannot judge: made in another pid namespace (or one unknown), or
    named before names carried a namespace. Their creator's pid means nothing here, so they are only
    listed; where they were made, `soaklab shm reclaim` judges them."""
    ours = pid_namespace()
    names = sorted(os.listdir(shm_dir)) if shm_dir.is_dir() else []
    return [name for name in names if LEGACY_NAME.match(name) or (
        (match := SEGMENT_NAME.match(name)) and (match["namespace"] != ours or ours == UNKNOWN_NAMESPACE))]


def reclaim_orphans(shm_dir: Path = SHM_DIR, dry_run: bool = False) -> tuple[list[str], list[str]]:
    """Unlink every orphaned segment: (the names reclaimed, one error line per name that could not be)."""
    reclaimed, errors = [], []
    for name in orphaned_segments(shm_dir):
        if not dry_run:
            try:
                (shm_dir / name).unlink()
            except FileNotFoundError:
                continue  # gone meanwhile
            except OSError as exc:
                errors.append(f"{shm_dir / name}: {exc.strerror or exc}")
                continue
        reclaimed.append(name)
    return reclaimed, errors


def reclaim_at_start() -> str | None:
    """What every learner does before it creates its own segments: reclaim those of soaklab learners of
    its own pid namespace that are gone, by the rule of `soaklab shm reclaim` (reclaim_orphans), so that
    a run whose whole tree was killed at once (a Slurm cancel, the OOM killer) leaves nothing for good
    once another run starts on the host; another namespace's are never touched.
    One line saying what was reclaimed, or could not be; None if neither (or if
    SOAKLAB_SHM_RECLAIM_AT_START=0 turns it off)."""
    if not reclaim_at_start_enabled():
        return None
    reclaimed, errors = reclaim_orphans()
    if not reclaimed and not errors:
        return None
    pids = sorted({int(match["pid"]) for name in reclaimed if (match := SEGMENT_NAME.match(name))})
    done = (f"reclaimed {len(reclaimed)} segment(s) in {SHM_DIR} of soaklab learners that are gone "
            f"(pid {', '.join(map(str, pids))})" if reclaimed else "")
    failed = (f"could not reclaim {len(errors)} segment(s) of soaklab learners that are gone: {errors[0]}"
              if errors else "")
    return "; ".join(part for part in (done, failed) if part)
