"""Process lifetime helpers on real processes: the stack dump on SIGUSR1, the exits without teardown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO

CHILD = """
import sys, time
from soaklab.host.lifetime import dump_stacks_on_signal
dump_stacks_on_signal()
def waiting_in_a_named_place():
    print("ready", flush=True)
    time.sleep(600)
waiting_in_a_named_place()
"""


def test_sigusr1_dumps_every_stack_and_the_process_goes_on():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGUSR1)
        lines = []
        while not any("waiting_in_a_named_place" in line for line in lines):
            line = child.stderr.readline()
            assert line, "stderr closed before the stack arrived"
            lines.append(line)
        assert child.poll() is None, "the process must go on after the dump"
    finally:
        child.kill()
        child.wait()


EXITING = """
import atexit, sys
from soaklab.host.lifetime import exit_now
atexit.register(lambda: print("teardown ran", flush=True))
sys.stdout.write("written before the exit")  # no newline, no flush: exit_now flushes
exit_now(3)
"""


def test_exit_now_flushes_and_skips_the_teardown():
    done = subprocess.run([sys.executable, "-c", EXITING], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "written before the exit"  # and no "teardown ran": atexit never ran


# A spawned worker that holds a class-level multiprocessing lock for its whole life, as tqdm does once
# torch.compile has built a progress bar in it (the collector on the GPU), and ends without teardown.
WORKER_HOLDING_A_LOCK = """
import multiprocessing as mp, os, sys
from soaklab.host.lifetime import leave

HELD = []

def worker(how):
    HELD.append(mp.get_context("spawn").RLock())  # never released by the worker's own code
    leave(0) if how == "leave" else os._exit(0)

if __name__ == "__main__":
    child = mp.get_context("spawn").Process(target=worker, args=(sys.argv[1],))
    child.start()
    child.join(60)
    print("exitcode", child.exitcode, flush=True)
"""


@pytest.mark.parametrize("how", ["leave", "os._exit"])
def test_leave_unregisters_the_semaphores_a_worker_made(tmp_path, how):
    program = tmp_path / "worker.py"
    program.write_text(WORKER_HOLDING_A_LOCK)
    done = subprocess.run([sys.executable, str(program), how], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    assert done.returncode == 0 and "exitcode 0" in done.stdout, done.stderr
    leaked = "leaked semaphore" in done.stderr
    # os._exit is the control: the same worker without the finalizers leaves the tracker's warning
    assert leaked == (how == "os._exit"), done.stderr
