"""The one waiting flock: a planted symlink is refused in one line, a held lock times out in the caller's words."""

from __future__ import annotations

import fcntl
import os

import pytest

from soaklab.errors import InvalidInput
from soaklab.files.locks import exclusive


def test_a_symlink_planted_as_the_lock_is_refused_and_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    (tmp_path / "x.lock").symlink_to(target)
    with pytest.raises(InvalidInput, match="x.lock: cannot open this lock file"):
        with exclusive(tmp_path / "x.lock", 1.0, lambda: RuntimeError("unused")):
            pass
    assert not target.exists()


def test_a_held_lock_times_out_with_the_callers_error(tmp_path):
    path = tmp_path / "y.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held by this descriptor: another open file description must wait
    waited = []
    try:
        with pytest.raises(TimeoutError, match="held"):
            with exclusive(path, 0.2, lambda: TimeoutError("held"), lambda: waited.append(1)):
                pass
    finally:
        os.close(fd)
    assert waited == [1]
    with exclusive(path, 0.2, lambda: TimeoutError("held")):  # released: taken at once
        pass
