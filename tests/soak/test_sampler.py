"""Sampling real processes: FD classes from /proc, the process tree, run-dir progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from multiprocessing import shared_memory

from soaklab.soak.sampler import count_fds, run_dir_progress, session_members, take_sample

CHILD = """
import os, socket, sys, time
from multiprocessing import shared_memory
fds = [os.eventfd(0) for _ in range(3)]
pipes = [os.pipe() for _ in range(2)]
sock = socket.socket()
shm = shared_memory.SharedMemory(create=True, size=4096, name=sys.argv[1])
print("ready", flush=True)
time.sleep(60)
"""


def test_fd_classes_of_a_real_process(tmp_path):
    name = f"fdtest_{os.getpid()}"
    child = subprocess.Popen([sys.executable, "-c", CHILD, name], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        counts = count_fds(child.pid)
        assert counts["eventfd"] == 3
        assert counts["pipe"] >= 4  # two pipes, plus its stdout
        assert counts["socket"] == 1
        assert counts["shared_memory"] == 2  # the segment's fd and mmap's duplicate of it
        sample = take_sample(os.getpid(), tmp_path, 1.0, with_gpu=False)
        assert child.pid in {p["pid"] for p in sample["processes"]}, "children are part of the tree"
        assert sample["fds"]["eventfd"] >= 3 and sample["gpu_memory_bytes"] is None
    finally:
        child.kill()
        child.wait()
        try:  # the child's resource tracker may have unlinked it already
            shared_memory.SharedMemory(name=name).unlink()
        except FileNotFoundError:
            pass


def test_session_members_include_detached_grandchildren():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        assert [p.pid for p in session_members(child.pid)] == [child.pid]
    finally:
        child.kill()
        child.wait()


def test_run_dir_progress_ignores_the_console_log(tmp_path):
    assert run_dir_progress(tmp_path / "missing")["files"] == 0
    (tmp_path / "soak-console.log").write_text("lots of output")
    before = run_dir_progress(tmp_path)
    assert before["files"] == 0 and before["iteration"] is None
    (tmp_path / "progress.json").write_text(json.dumps({"iteration": 7, "env_steps": 56, "wall_time_s": 1.0}))
    after = run_dir_progress(tmp_path)
    assert (after["files"], after["iteration"], after["env_steps"]) == (1, 7, 56)
