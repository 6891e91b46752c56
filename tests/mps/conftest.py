"""Records live under a per-test cache dir; a 'daemon' is a real process with a real Unix socket."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from soaklab.mps.ownership import DaemonRecord, proc_start_time, write_record


@pytest.fixture(autouse=True)
def record_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SOAKLAB_MPS_RECORD_DIR", str(tmp_path / "mps-records"))
    return tmp_path / "mps-records"


@dataclass
class Listener:
    """A process standing where a control daemon would: its pid, start time and a bound control socket."""

    proc: subprocess.Popen
    pipe_dir: Path
    log_dir: Path
    sock: socket.socket

    def record(self, name: str = "gpu-test", **changes) -> DaemonRecord:
        fields = dict(name=name, uid=os.getuid(), host=socket.gethostname(), gpu_uuids=("GPU-test",),
                      pipe_dir=str(self.pipe_dir), log_dir=str(self.log_dir), control_pid=self.proc.pid,
                      control_start_time=proc_start_time(self.proc.pid), started_at=time.time())
        fields.update(changes)
        record = DaemonRecord(**fields)
        write_record(record)
        return record

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def listener(tmp_path) -> Iterator[Listener]:
    # Unix socket paths are short: keep the pipe dir under /tmp rather than pytest's deep tmp_path.
    base = Path(f"/tmp/soaklab-test-{os.getpid()}-{time.monotonic_ns()}")
    pipe_dir, log_dir = base / "pipe", base / "log"
    pipe_dir.mkdir(parents=True)
    log_dir.mkdir()
    (log_dir / "control.log").write_text("daemon log\n")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(pipe_dir / "control"))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield Listener(proc, pipe_dir, log_dir, sock)
    proc.kill()
    proc.wait()
    sock.close()
    shutil.rmtree(base, ignore_errors=True)
