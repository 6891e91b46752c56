"""An exclusive flock waited for within a bound: the one wait loop of every soaklab lock file.

flock, because the kernel drops it when its holder dies, however it dies: a killed holder never
leaves a lock behind. The caller says what a wait past the bound means (its own one-line error)."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from soaklab.errors import InvalidInput

POLL_S = 0.05


@contextmanager
def exclusive(path: Path, wait_s: float, too_long: Callable[[], Exception],
              waiting: Callable[[], None] | None = None) -> Iterator[Path]:
    """Hold an exclusive lock on `path` (created 0600, never through a symlink, close-on-exec so a
    process started under it does not inherit it). Waits at most `wait_s`, then raises too_long();
    `waiting` is called once, when the lock is found held."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:  # a symlink planted there (ELOOP), a directory, no permission: one line
        raise InvalidInput(f"{path}: cannot open this lock file ({exc.strerror or exc}); remove it if it "
                           "is not a regular file of soaklab's") from None
    try:
        deadline, told = time.monotonic() + wait_s, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise too_long() from None
                if waiting is not None and not told:
                    waiting()
                    told = True
                time.sleep(POLL_S)
        yield path
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
