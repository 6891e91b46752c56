"""Segments a learner could not unlink (its whole process tree killed at once) are reclaimed by
`soaklab shm reclaim`, and by the next run that starts: real /dev/shm segments left by a real process
that is gone, beside a live one.

Every soaklab run that starts on this host (another test's, meanwhile) reclaims orphans too: a test
whose orphans another run took first says so (Raced) and tries again with new ones."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from soaklab.rl.shm import SHM_DIR, SharedArrays, orphaned_segments
from tests.rl.conftest import own_segments, process_gone

if not SHM_DIR.is_dir():
    pytest.skip("no /dev/shm on this host", allow_module_level=True)

# A learner's segments, then an exit that neither unlinks them nor lets the resource tracker do it:
# what a SIGKILL of the learner and its tracker together leaves behind.
ORPHAN = """
import os
from multiprocessing import resource_tracker
from soaklab.rl.shm import SharedArrays
arrays = SharedArrays.create({"ring_obs": ((4, 5), "float32"), "control": ((8,), "int64")})
for seg in arrays._segments.values():
    resource_tracker.unregister(seg._name, "shared_memory")
print(" ".join(arrays.names), flush=True)
os._exit(0)
"""


def soaklab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "soaklab", *args], capture_output=True, text=True, timeout=120)


RECLAIMED = re.compile(r"^train: reclaimed (?P<count>\d+) segment\(s\) in /dev/shm of soaklab learners that are gone "
                       r"\(pid (?P<pids>[\d, ]+)\)")


class Raced(Exception):
    """Another run starting on this host reclaimed the test's orphans before the test could."""


def until_unraced(attempt, tries: int = 3) -> None:
    for _ in range(tries - 1):
        try:
            return attempt()
        except Raced:
            continue
    return attempt()  # the last try's Raced fails the test


def exist(names: list[str]) -> bool:
    return all((SHM_DIR / name).exists() for name in names)


def test_a_gone_learners_segments_are_reclaimed_and_a_live_ones_kept():
    def attempt() -> None:
        left = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=120, check=True)
        orphans = left.stdout.split()
        live = SharedArrays.create({"ring_obs": ((2, 2), "float32")})  # this process's: alive
        try:
            assert len(orphans) == 2
            listed = set(orphaned_segments())
            if not exist(orphans):
                raise Raced
            assert set(orphans) <= listed and not set(live.names) & listed

            dry = soaklab("shm", "reclaim", "--dry-run")
            assert dry.returncode == 0, dry.stderr
            if not exist(orphans):
                raise Raced
            assert all(f"would reclaim /dev/shm/{name}" in dry.stdout for name in orphans)

            done = soaklab("shm", "reclaim")
            assert done.returncode == 0, done.stderr
            assert not any((SHM_DIR / name).exists() for name in orphans)
            if not all(f"reclaimed /dev/shm/{name}" in done.stdout for name in orphans):
                raise Raced
            assert exist(live.names), "a live learner's segments stay"
        finally:
            live.close()
            for name in orphans:
                (SHM_DIR / name).unlink(missing_ok=True)

    until_unraced(attempt)


def test_a_run_that_starts_reclaims_what_a_tree_wide_sigkill_left(start_train):
    """A Slurm cancel or the OOM killer: learner, collector and resource tracker SIGKILLed at once, so
    nothing unlinks the learner's segments. The next run's learner reclaims them before it creates its
    own, and says so in one line naming the gone learner."""
    tries = iter(range(3))

    def attempt() -> None:
        k = next(tries)
        victim = start_train("algo.max_iterations=100000", name=f"victim-{k}")
        victim.wait_for_iteration(1)
        tree = [victim.proc.pid, *(c.pid for c in psutil.Process(victim.proc.pid).children(recursive=True))]
        left = own_segments([victim.proc.pid])
        assert len(tree) >= 2 and left, (tree, left)  # the learner (the train process) and its collector
        os.killpg(victim.proc.pid, signal.SIGKILL)  # the whole group at once: nothing cleans up
        victim.wait()
        assert all(process_gone(pid) for pid in tree)
        if not exist(left):
            raise Raced
        nxt = start_train("algo.max_iterations=2", name=f"next-{k}")
        assert nxt.wait() == 0
        out = nxt.output()
        assert not any((SHM_DIR / name).exists() for name in left), "the gone learner's segments stay"
        lines = [m for ln in out.splitlines() if (m := RECLAIMED.match(ln))]
        assert len(lines) <= 1, out  # one line, at the learner's start
        if not lines or str(victim.proc.pid) not in lines[0]["pids"].split(", "):
            raise Raced  # another run that started meanwhile reclaimed them
        assert int(lines[0]["count"]) >= len(left)

    until_unraced(attempt)


def test_names_of_another_form_are_never_judged(tmp_path):
    (tmp_path / "soaklab-notapid-0011aabb-ring_obs").write_bytes(b"")
    (tmp_path / "soaklab-999999999-0011aabb-../x").parent.mkdir(exist_ok=True)
    (tmp_path / "other-1-0011aabb-ring_obs").write_bytes(b"")
    (tmp_path / "soaklab-999999999-0011aabb-ring_obs").write_bytes(b"")
    assert orphaned_segments(Path(tmp_path)) == ["soaklab-999999999-0011aabb-ring_obs"]
