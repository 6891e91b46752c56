"""Named shared-memory arrays (docs/runtime.md).

The learner creates and unlinks every segment; the collector attaches by name.
Named `multiprocessing.shared_memory` segments live in /dev/shm, so a leak is
visible to the soak monitor. Both processes use the learner's resource
tracker (spawn children inherit it), so the collector attaching does not make
a second owner.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np

SEGMENT_PREFIX = "soaklab"
SHM_DIR = Path("/dev/shm")
# What SharedArrays.create names: soaklab-<creating learner's pid>-<token>-<array>.
SEGMENT_NAME = re.compile(rf"^{SEGMENT_PREFIX}-(\d+)-[0-9a-f]{{8}}-[a-z_]+$")


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
        token = f"{SEGMENT_PREFIX}-{os.getpid()}-{secrets.token_hex(4)}"
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


def orphaned_segments(shm_dir: Path = SHM_DIR) -> list[str]:
    """soaklab segments whose creating learner is gone. A learner unlinks its segments on every exit it
    lives through, and its resource tracker after a SIGKILL; only a kill of both (a whole process tree
    killed at once: a session or a container ended) leaves them. Names of another form are not soaklab's
    to judge and are never listed."""
    import psutil

    orphans = []
    for name in sorted(os.listdir(shm_dir)) if shm_dir.is_dir() else []:
        match = SEGMENT_NAME.match(name)
        if match and not psutil.pid_exists(int(match.group(1))):
            orphans.append(name)
    return orphans


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
    """What every learner does before it creates its own segments: reclaim those of soaklab learners
    that are gone, by the rule of `soaklab shm reclaim` (reclaim_orphans), so that a run whose whole
    tree was killed at once (a Slurm cancel, the OOM killer) leaves nothing for good once another run
    starts on the host. One line saying what was reclaimed, or could not be; None if neither."""
    reclaimed, errors = reclaim_orphans()
    if not reclaimed and not errors:
        return None
    pids = sorted({int(match.group(1)) for name in reclaimed if (match := SEGMENT_NAME.match(name))})
    done = (f"reclaimed {len(reclaimed)} segment(s) in {SHM_DIR} of soaklab learners that are gone "
            f"(pid {', '.join(map(str, pids))})" if reclaimed else "")
    failed = (f"could not reclaim {len(errors)} segment(s) of soaklab learners that are gone: {errors[0]}"
              if errors else "")
    return "; ".join(part for part in (done, failed) if part)
