"""Control commands to the MPS control daemon: a busy daemon is retried within a bound, anything else
fails at once (docs/mps.md).

The daemon serves one connection at a time and refuses a client that connects meanwhile with "Cannot
send command to MPS control daemon process". Where the NVIDIA binaries exist, concurrent clients hit a
real control daemon; everywhere, a real executable stand-in found on PATH under the driver's name
answers busy for its first tries, always, or as if no daemon ran.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soaklab.errors import RuntimeFailure
from soaklab.mps.client import MpsSelection, sharing_evidence
from soaklab.mps.daemon import CONTROL_BIN, BusyRetry, control, find_control_pid, server_pids
from soaklab.mps.ownership import proc_start_time

BUSY = "Cannot send command to MPS control daemon process"
GONE = "Cannot find MPS control daemon process"

# The stand-in keeps its state in the pipe directory it is pointed at: `mode` says how to answer,
# `tries` gets one line per invocation (what the test counts).
STAND_IN = f"""#!{sys.executable}
import os, sys
from pathlib import Path
state = Path(os.environ["CUDA_MPS_PIPE_DIRECTORY"])
command = sys.stdin.read().strip()
with open(state / "tries", "a") as fh:
    fh.write(command + "\\n")
tries = len((state / "tries").read_text().splitlines())
mode, arg = (state / "mode").read_text().split()
if mode == "gone":
    sys.exit(print({GONE!r}, file=sys.stderr) or 1)
if mode == "busy" and (arg == "always" or tries <= int(arg)):
    sys.exit(print({BUSY!r}, file=sys.stderr) or 1)
print("4242")
print("4343")
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    """A control program first on PATH; returns the pipe directory whose `mode` file drives it."""
    bin_dir, pipe_dir = tmp_path / "bin", tmp_path / "pipe"
    bin_dir.mkdir()
    pipe_dir.mkdir()
    program = bin_dir / CONTROL_BIN
    program.write_text(STAND_IN)
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return pipe_dir


def tries(pipe_dir: Path) -> list[str]:
    return (pipe_dir / "tries").read_text().splitlines()


def test_a_busy_daemon_is_asked_again_until_it_answers(stand_in):
    """The trainer's evidence call, as the losing run of two started together made it."""
    (stand_in / "mode").write_text("busy 3")
    selection = MpsSelection("soaklab record", str(stand_in), None, "gpu-test", ("GPU-test",), None)
    evidence = sharing_evidence(selection, "cuda:0", "cuda:0")
    assert evidence["server_pids"] == [4242, 4343] and evidence["validated"] is True
    assert tries(stand_in) == ["get_server_list"] * 4  # three refusals, then the answer


def test_a_daemon_busy_throughout_fails_after_the_bound_with_the_cause(stand_in):
    (stand_in / "mode").write_text("busy always")
    bound = BusyRetry(total_s=1.0, first_s=0.05, max_s=0.2)
    with pytest.raises(RuntimeFailure) as err:
        control(str(stand_in), "get_server_list", bound)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{stand_in}/control: 'get_server_list' failed (exit 1): the control daemon stayed busy")
    assert message.endswith(f"(the bound, CONTROL_BUSY_RETRY_S, is 1s); last answer: {BUSY}")
    found = re.search(r"busy for ([0-9.]+)s over (\d+) tries", message)
    assert found is not None
    assert float(found.group(1)) >= bound.total_s  # it gave up only once the bound had passed
    assert int(found.group(2)) == len(tries(stand_in)) >= 2  # each try was a real invocation


def test_no_daemon_fails_at_once(stand_in):
    (stand_in / "mode").write_text("gone -")
    with pytest.raises(RuntimeFailure) as err:
        server_pids(str(stand_in))
    assert str(err.value) == f"{stand_in}/control: 'get_server_list' failed (exit 1): {GONE}"
    assert tries(stand_in) == ["get_server_list"]  # not a busy daemon: never retried


CLIENT = """import sys
from soaklab.mps.daemon import server_pids
for _ in range(int(sys.argv[2])):
    server_pids(sys.argv[1])
"""


@pytest.mark.skipif(shutil.which(CONTROL_BIN) is None,
                    reason=f"needs {CONTROL_BIN} on PATH (the NVIDIA driver's MPS binaries) for a real control "
                           "daemon; the retry is tested above against a stand-in control program")
def test_concurrent_clients_of_a_real_control_daemon_all_get_answers():
    base = Path(f"/tmp/soaklab-test-{os.getpid()}-{time.monotonic_ns()}")
    pipe_dir, log_dir = base / "pipe", base / "log"
    pipe_dir.mkdir(parents=True)
    log_dir.mkdir()
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(pipe_dir), CUDA_MPS_LOG_DIRECTORY=str(log_dir))
    subprocess.run([CONTROL_BIN, "-d"], env=env, stdin=subprocess.DEVNULL, check=True, timeout=30)
    pid = None
    try:
        for _ in range(300):
            pid = find_control_pid(str(pipe_dir))
            if pid is not None and (pipe_dir / "control").exists():
                break
            time.sleep(0.1)
        assert pid is not None, (log_dir / "control.log").read_text()
        clients = [subprocess.Popen([sys.executable, "-c", CLIENT, str(pipe_dir), "20"], stderr=subprocess.PIPE,
                                    text=True) for _ in range(8)]
        results = [(proc.communicate(timeout=300)[1], proc.returncode) for proc in clients]
        assert results == [("", 0)] * 8
    finally:
        if pid is not None:
            started = proc_start_time(pid)
            control(str(pipe_dir), "quit")
            for _ in range(300):
                if proc_start_time(pid) != started:
                    break
                time.sleep(0.1)
        shutil.rmtree(base, ignore_errors=True)
