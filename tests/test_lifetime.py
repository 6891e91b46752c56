"""Process lifetime helpers on real processes: the stack dump on SIGUSR1, the exit without teardown."""

from __future__ import annotations

import signal
import subprocess
import sys

CHILD = """
import sys, time
from soaklab.lifetime import dump_stacks_on_signal
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
from soaklab.lifetime import exit_now
atexit.register(lambda: print("teardown ran", flush=True))
sys.stdout.write("written before the exit")  # no newline, no flush: exit_now flushes
exit_now(3)
"""


def test_exit_now_flushes_and_skips_the_teardown():
    done = subprocess.run([sys.executable, "-c", EXITING], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "written before the exit"  # and no "teardown ran": atexit never ran
