"""Segments a learner could not unlink (its whole process tree killed at once) are reclaimed by
`soaklab shm reclaim`: real /dev/shm segments left by a real process that is gone, beside a live one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from soaklab.rl.shm import SHM_DIR, SharedArrays, orphaned_segments

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


def test_a_gone_learners_segments_are_reclaimed_and_a_live_ones_kept():
    left = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=120, check=True)
    orphans = left.stdout.split()
    live = SharedArrays.create({"ring_obs": ((2, 2), "float32")})  # this process's: alive
    try:
        assert len(orphans) == 2 and all((SHM_DIR / name).exists() for name in orphans)
        assert set(orphans) <= set(orphaned_segments()) and not set(live.names) & set(orphaned_segments())

        dry = soaklab("shm", "reclaim", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert all(f"would reclaim /dev/shm/{name}" in dry.stdout for name in orphans)
        assert all((SHM_DIR / name).exists() for name in orphans), "a dry run unlinks nothing"

        done = soaklab("shm", "reclaim")
        assert done.returncode == 0, done.stderr
        assert all(f"reclaimed /dev/shm/{name}" in done.stdout for name in orphans)
        assert not any((SHM_DIR / name).exists() for name in orphans)
        assert all((SHM_DIR / name).exists() for name in live.names), "a live learner's segments stay"
    finally:
        live.close()
        for name in orphans:
            (SHM_DIR / name).unlink(missing_ok=True)


def test_names_of_another_form_are_never_judged(tmp_path):
    (tmp_path / "soaklab-notapid-0011aabb-ring_obs").write_bytes(b"")
    (tmp_path / "soaklab-999999999-0011aabb-../x").parent.mkdir(exist_ok=True)
    (tmp_path / "other-1-0011aabb-ring_obs").write_bytes(b"")
    (tmp_path / "soaklab-999999999-0011aabb-ring_obs").write_bytes(b"")
    assert orphaned_segments(Path(tmp_path)) == ["soaklab-999999999-0011aabb-ring_obs"]
