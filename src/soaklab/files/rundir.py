"""A run directory: its rules and its well-known files (docs/runtime.md, "The run directory").

The soak monitor reads file changes in a run dir as the trainer's liveness, so a run dir starts new
or empty. The monitor may put two files there first: its console log (which claims the dir for one
soak) and the run config the trainer is to load; the trainer's lock file claims it for one trainer.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput

CONSOLE_LOG = "soak-console.log"
RUN_CONFIG = "run_config.json"
SEGMENTS = "segments.json"  # the run's segments: its kills, resumes and the code each ran (soaklab.rl.resume)
LOCK = ".soaklab.lock"

_claims: list[Any] = []  # open lock files: a claim lasts as long as this process


def check_path_shape(flag: str, path: Path, want_dir: bool) -> None:
    """A path that can become what it is meant to be: no dangling link, no file under a file, a
    directory where a directory is expected and a file where a file is."""
    if path.is_symlink() and not path.exists():
        raise InvalidInput(f"{flag} {path}: a dangling symbolic link; remove it or choose another path")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise InvalidInput(f"{flag} {path}: {parent} is a file, not a directory")
    if path.exists() and path.is_dir() != want_dir:
        kind = "a directory" if path.is_dir() else "a file"
        raise InvalidInput(f"{flag} {path}: is {kind}; expected {'a directory' if want_dir else 'a file path'}")


def check_new_or_empty(flag: str, run_dir: Path, allowed: tuple[str, ...] = ()) -> None:
    """The run dir is new, or holds nothing but the `allowed` names."""
    check_path_shape(flag, run_dir, want_dir=True)
    if run_dir.exists() and any(p.name not in allowed for p in run_dir.iterdir()):
        sep = " " if flag.startswith("--") else "="  # a CLI flag, or a config key
        raise InvalidInput(f"{flag}{sep}{run_dir}: exists and is not empty; choose a new directory")


def next_run_dir(algo: str, task: str, sim: str, root: Path = Path("runs"), suffix: str = "") -> Path:
    """runs/<algo>-<task>-<sim>-<n><suffix>, the first n not taken (suffix: _gpuxN for N ranks), made
    here, empty: two runs started together each get a dir of their own (mkdir is the atomic claim;
    the run's lock follows once it starts)."""
    root.mkdir(parents=True, exist_ok=True)
    n = 0
    while True:
        path = root / f"{algo}-{task}-{sim}-{n}{suffix}"
        try:
            path.mkdir()
        except FileExistsError:
            n += 1
            continue
        return path


def claim(run_dir: Path) -> None:
    """An exclusive lock on RUN_DIR/.soaklab.lock for this process's lifetime: two trainers aimed at
    one dir cannot both start, however close together they check it."""
    handle = open(run_dir / LOCK, "a")  # noqa: SIM115 - held open on purpose
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise InvalidInput(f"training.log_dir={run_dir}: in use by another soaklab process; "
                           "choose a new directory") from None
    _claims.append(handle)
