"""Ownership records of soaklab-started MPS daemons (docs/mps.md).

`soaklab mps start` writes `~/.cache/soaklab/mps/<name>/daemon.json` with the
evidence that proves ownership later: uid, host, the control daemon's pid and
its Linux start time (so a recycled pid is not mistaken for the daemon), the
GPU UUIDs and the pipe and log directories. A record whose process is gone is
stale: the mutating commands move it aside into `quarantine/` before reusing
the name; the read-only ones only report it. The mutating commands hold an
exclusive lock on the records root while they read, decide and write
(`records_lock`): N runs started at once each ensure the daemon of their GPU.
"""

from __future__ import annotations

import os
import socket
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput, RuntimeFailure
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.files.locks import exclusive

RECORD_FILE = "daemon.json"
QUARANTINE_DIR = "quarantine"
RUNTIME_ROOT = Path("/tmp/soaklab-mps")  # short on purpose: Unix socket paths are limited to 107 bytes
CONTROL_SOCKET = "control"
RECORD_SCHEMA_VERSION = 1
LOCK_FILE = ".lock"  # a file, so load_records (which reads directories) passes over it
# A holder is `start` or `stop`, each bounded by its own waits (under a minute); past this, a holder is stuck.
LOCK_WAIT_S = 120.0

LIVE, STALE, FOREIGN = "live", "stale", "foreign"


RECORD_DIR_ENV = "SOAKLAB_MPS_RECORD_DIR"  # tests and shared service accounts keep records elsewhere


def records_root() -> Path:
    if os.environ.get(RECORD_DIR_ENV):
        return Path(os.environ[RECORD_DIR_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "soaklab" / "mps"


@contextmanager
def records_lock(wait_s: float = LOCK_WAIT_S) -> Iterator[Path]:
    """Hold the records root's lock (flock: the kernel drops it when the holder dies, however it dies).

    Without it two `mps start`s at once both find no record and both start a daemon on one pipe, and
    two stops both move one stale record aside (the second fails on the vanished directory)."""
    root = records_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = root / LOCK_FILE
    with exclusive(path, wait_s, lambda: RuntimeFailure(
            f"{path}: another soaklab mps command has held this lock for over {wait_s:g}s; see "
            "`soaklab mps status`, and end the stuck command")):
        yield path


def proc_start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot); None when the pid is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.lstat().st_mode)
    except FileNotFoundError:
        return False


@dataclass(frozen=True)
class DaemonRecord:
    name: str
    uid: int
    host: str
    gpu_uuids: tuple[str, ...]
    pipe_dir: str
    log_dir: str
    control_pid: int
    control_start_time: int
    started_at: float
    schema_version: int = RECORD_SCHEMA_VERSION

    @property
    def control_pipe(self) -> Path:
        return Path(self.pipe_dir) / CONTROL_SOCKET

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["gpu_uuids"] = list(self.gpu_uuids)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DaemonRecord:
        data = dict(data)
        data["gpu_uuids"] = tuple(data["gpu_uuids"])
        return cls(**data)

    def state(self) -> tuple[str, str]:
        """(live | stale | foreign, why). Only a live record proves ownership of a running daemon."""
        if self.uid != os.getuid() or self.host != socket.gethostname():
            return FOREIGN, f"recorded by uid {self.uid} on {self.host}"
        started = proc_start_time(self.control_pid)
        if started is None:
            return STALE, f"control pid {self.control_pid} is gone"
        if started != self.control_start_time:
            return STALE, f"pid {self.control_pid} now belongs to another process (start time differs)"
        if not is_socket(self.control_pipe):
            return STALE, f"{self.control_pipe} is not a socket"
        return LIVE, f"control pid {self.control_pid} answers on {self.control_pipe}"


@dataclass(frozen=True)
class LoadedRecord:
    path: Path  # the record's directory
    record: DaemonRecord | None  # None: unreadable
    problem: str | None = None

    def state(self) -> tuple[str, str]:
        if self.record is None:
            return STALE, f"unreadable record: {self.problem}"
        return self.record.state()


def record_dir(name: str) -> Path:
    return records_root() / name


def write_record(record: DaemonRecord) -> Path:
    path = record_dir(record.name) / RECORD_FILE
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_json_atomic(path, record.as_json())
    return path


def load_records() -> list[LoadedRecord]:
    root = records_root()
    if not root.is_dir():
        return []
    out = []
    for entry in sorted(root.iterdir()):
        if entry.name == QUARANTINE_DIR or not entry.is_dir():
            continue
        path = entry / RECORD_FILE
        try:
            out.append(LoadedRecord(entry, DaemonRecord.from_json(read_json(path))))
        except FileNotFoundError:
            continue
        except (ValueError, TypeError, KeyError) as exc:
            out.append(LoadedRecord(entry, None, f"{path}: {type(exc).__name__}: {exc}"))
    return out


def quarantine(loaded: LoadedRecord, why: str) -> Path:
    """Move a stale record aside (never delete evidence); returns where it went."""
    target_root = records_root() / QUARANTINE_DIR
    target_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = target_root / f"{loaded.path.name}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    loaded.path.rename(target)
    (target / "quarantined.txt").write_text(why + "\n")
    return target


def live_records(gpu_uuid: str | None = None) -> list[DaemonRecord]:
    out = []
    for loaded in load_records():
        if loaded.record is not None and loaded.state()[0] == LIVE:
            if gpu_uuid is None or gpu_uuid in loaded.record.gpu_uuids:
                out.append(loaded.record)
    return out


def find_record(name: str) -> LoadedRecord | None:
    return next((r for r in load_records() if r.path.name == name), None)


def make_private_dir(path: Path, what: str) -> None:
    """Create `path` mode 0700, owned by us and not a symlink, or refuse."""
    if not path.is_absolute():
        raise InvalidInput(f"--{what}={path}: must be an absolute path")
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise InvalidInput(f"--{what}={path}: is not a plain directory")
    if info.st_uid != os.getuid():
        raise InvalidInput(f"--{what}={path}: owned by uid {info.st_uid}, not by this user; choose another path")
    os.chmod(path, 0o700)
