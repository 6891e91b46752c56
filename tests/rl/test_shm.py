"""Segments a learner could not unlink (its whole process tree killed at once) are reclaimed by
`soaklab shm reclaim`, and by the next run that starts: real /dev/shm segments left by a real process
that is gone, beside a live one. Only segments made in the judge's own pid namespace are judged: another
namespace's pids mean nothing here, so its live runs would look gone.

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

from soaklab.rl.shm import SHM_DIR, SharedArrays, orphaned_segments, pid_namespace, unjudged_segments
from soaklab.soak.sampler import shm_names
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
    victims_semaphores: set[str] = set()

    def attempt() -> None:
        k = next(tries)
        victim = start_train("algo.max_iterations=100000", name=f"victim-{k}")
        victim.wait_for_iteration(1)
        tree = [victim.proc.pid, *(c.pid for c in psutil.Process(victim.proc.pid).children(recursive=True))]
        left = own_segments([victim.proc.pid])
        assert len(tree) >= 2 and left, (tree, left)  # the learner (the train process) and its collector
        # The collector opened every semaphore by its name (the learner maps the ones it made under
        # glibc's temporary name, so /proc shows those as deleted files, never by name).
        named = {n for pid in tree for n in shm_names(pid) if n.startswith("sem.mp-")}
        assert named, tree  # the run's channels wait on named semaphores
        victims_semaphores.update(named)
        os.killpg(victim.proc.pid, signal.SIGKILL)  # the whole group at once: nothing cleans up
        victim.wait()
        assert all(process_gone(pid) for pid in tree)
        if not exist(left):
            raise Raced
        nxt = start_train("algo.max_iterations=2", name=f"next-{k}", reclaim=True)
        assert nxt.wait() == 0
        out = nxt.output()
        assert not any((SHM_DIR / name).exists() for name in left), "the gone learner's segments stay"
        lines = [m for ln in out.splitlines() if (m := RECLAIMED.match(ln))]
        assert len(lines) <= 1, out  # one line, at the learner's start
        if not lines or str(victim.proc.pid) not in lines[0]["pids"].split(", "):
            raise Raced  # another test's run with the reclaim on (test_shm only) took them first
        assert int(lines[0]["count"]) >= len(left)

    try:
        until_unraced(attempt)
    finally:
        # The SIGKILL took Python's resource tracker too, so the victims' multiprocessing semaphores
        # stay named in /dev/shm: this test removes those, read from the victims' own /proc entries
        # before the kill. Never a name merely unmapped: a learner that has just made its semaphores
        # maps them under glibc's temporary names until its collector opens them, and removing one
        # then kills that run's collector at its start (another test's, seen under CI's load).
        for name in victims_semaphores:
            (SHM_DIR / name).unlink(missing_ok=True)


def test_only_this_pid_namespaces_segments_are_judged(tmp_path):
    """A pid (999999999: above any pid_max, so gone here) is judged only in the namespace it was made in;
    another namespace's, an unknown one's and the old names without a namespace are listed, never
    reclaimed. Names of another form are not soaklab's at all."""
    ours, theirs = pid_namespace(), str(int(pid_namespace()) + 1)
    for name in (f"soaklab-ns{ours}-999999999-0011aabb-ring_obs", f"soaklab-ns{theirs}-999999999-0011aabb-ring_obs",
                 "soaklab-nsunknown-999999999-0011aabb-ring_obs", "soaklab-999999999-0011aabb-ring_obs",
                 f"soaklab-ns{ours}-notapid-0011aabb-ring_obs", f"soaklab-ns{ours}-0-0011aabb-ring_obs",
                 f"other-ns{ours}-999999999-0011aabb-ring_obs"):
        (tmp_path / name).write_bytes(b"")
    assert orphaned_segments(Path(tmp_path)) == [f"soaklab-ns{ours}-999999999-0011aabb-ring_obs"]
    assert unjudged_segments(Path(tmp_path)) == sorted(["soaklab-999999999-0011aabb-ring_obs",
                                                        f"soaklab-ns{theirs}-999999999-0011aabb-ring_obs",
                                                        "soaklab-nsunknown-999999999-0011aabb-ring_obs"])


def unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "-p", "-f", "--mount-proc", "true"], capture_output=True,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# Segments of a live learner-like process that holds them until its stdin closes.
HOLD = """
import sys
from soaklab.rl.shm import SharedArrays
arrays = SharedArrays.create({"ring_obs": ((2, 2), "float32")})
print(" ".join(arrays.names), flush=True)
sys.stdin.readline()
arrays.close()
"""
IN_NEW_NAMESPACE = ["unshare", "-p", "-f", "--mount-proc"]


@pytest.mark.skipif(not unshare_works(), reason="no new pid namespace here (`unshare -p` needs CAP_SYS_ADMIN)")
def test_live_segments_of_another_pid_namespace_are_never_reclaimed():
    """Real pid namespaces sharing this /dev/shm: a live process in a new one holds segments; reclaim
    from here leaves them. The reverse: reclaim run in a third namespace, where this process's pid does
    not exist, leaves this process's live segments (and the other namespace's) alone too."""
    inside = subprocess.Popen([*IN_NEW_NAMESPACE, sys.executable, "-c", HOLD], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    live = SharedArrays.create({"ring_obs": ((2, 2), "float32")})
    try:
        theirs = inside.stdout.readline().split()
        assert theirs and exist(theirs), inside.poll()
        assert not theirs[0].startswith(f"soaklab-ns{pid_namespace()}-"), theirs  # named for its namespace

        here = soaklab("shm", "reclaim")
        assert here.returncode == 0, here.stderr
        assert exist(theirs) and all(f"shm: left /dev/shm/{name}: not made in this pid namespace" in here.stdout
                                     for name in theirs), here.stdout

        there = subprocess.run([*IN_NEW_NAMESPACE, sys.executable, "-m", "soaklab", "shm", "reclaim"],
                               capture_output=True, text=True, timeout=120)
        assert there.returncode == 0, there.stderr
        assert exist(live.names) and exist(theirs), there.stdout
        assert all(f"shm: left /dev/shm/{name}:" in there.stdout for name in [*live.names, *theirs]), there.stdout
    finally:
        inside.communicate("\n", timeout=60)  # it closes (and unlinks) its segments and exits
        live.close()
    assert inside.returncode == 0 and not any((SHM_DIR / name).exists() for name in theirs)
