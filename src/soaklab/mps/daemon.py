"""`soaklab mps start|doctor|status|env|stop`: a user-owned CUDA MPS control daemon (docs/mps.md).

The training path never starts or stops host services by itself: these
commands do, and leave a record proving what they own. `stop` quits only a
daemon whose record proves ownership (uid, host, control pid and its start
time) and never sends `quit` to a pipe it did not create; logs stay.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from soaklab.errors import InvalidInput, RuntimeFailure
from soaklab.mps.gpus import TOPOLOGY_MODES, PhysicalGpu, query_gpus, select_gpus
from soaklab.mps.ownership import (
    CONTROL_SOCKET,
    FOREIGN,
    LIVE,
    RUNTIME_ROOT,
    DaemonRecord,
    LoadedRecord,
    find_record,
    is_socket,
    live_records,
    load_records,
    make_private_dir,
    proc_start_time,
    quarantine,
    record_dir,
    records_lock,
    write_record,
)

CONTROL_BIN = "nvidia-cuda-mps-control"
SERVER_BIN = "nvidia-cuda-mps-server"
CONTROL_PID_FILE = "nvidia-cuda-mps-control.pid"
CONTROL_TIMEOUT_S = 10.0
START_WAIT_S = 15.0
STOP_WAIT_S = 30.0

# The control daemon serves one connection at a time: a client that connects meanwhile is refused at
# once, having done nothing, with this line (exit 1). N runs started together each ask it for their
# server list at the same moment, so that refusal is retried with backoff for at most
# CONTROL_BUSY_RETRY_S in all; any other failure (no daemon: "Cannot find MPS control daemon
# process") fails at once. docs/mps.md states the rule.
BUSY_MARKERS = ("cannot send command to mps control daemon process",)
CONTROL_BUSY_RETRY_S = 30.0
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.02, 1.0
_jitter = random.Random()  # its own generator: a run's seeded global `random` state is never touched


@dataclass(frozen=True)
class BusyRetry:
    """How long a control command keeps retrying while the daemon is busy, and its backoff."""

    total_s: float = CONTROL_BUSY_RETRY_S
    first_s: float = BACKOFF_FIRST_S
    max_s: float = BACKOFF_MAX_S


BUSY_RETRY = BusyRetry()


def default_name(gpu: PhysicalGpu) -> str:
    return f"gpu-{gpu.uuid.removeprefix('GPU-').lower()}"


NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SOCKET_PATH_MAX = 107  # bytes in sockaddr_un.sun_path, less the terminating NUL


def check_name(name: str) -> str:
    """A daemon name becomes a directory under the records root and /tmp/soaklab-mps: no paths."""
    if not NAME_RE.match(name):
        raise InvalidInput(f"--name={name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter "
                           "or digit")
    return name


def check_socket_path(pipe_dir: Path) -> None:
    path = pipe_dir / CONTROL_SOCKET
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise InvalidInput(f"--pipe-dir={pipe_dir}: the control socket path {path} is longer than "
                           f"{SOCKET_PATH_MAX} bytes (the Unix socket limit); choose a shorter --pipe-dir or --name")


def control_binary() -> str:
    path = shutil.which(CONTROL_BIN)
    if path is None:
        raise InvalidInput(f"{CONTROL_BIN}: not on PATH; install the NVIDIA CUDA MPS binaries of the driver")
    return path


def mps_env(pipe_dir: str, log_dir: str | None = None, gpu_uuid: str | None = None) -> dict[str, str]:
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe_dir)
    if log_dir is not None:
        env["CUDA_MPS_LOG_DIRECTORY"] = log_dir
    if gpu_uuid is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu_uuid
    return env


def is_busy(answer: str) -> bool:
    """The control daemon's refusal while it serves another client (transient, nothing was done)."""
    return any(marker in answer.lower() for marker in BUSY_MARKERS)


def control(pipe_dir: str, command: str, retry: BusyRetry = BUSY_RETRY) -> str:
    """Send one command to the control daemon on `pipe_dir`; its answer, stripped. While the daemon is
    busy with another client the command is sent again, with jittered exponential backoff, until
    `retry.total_s` has passed; then it fails naming the last answer, the tries and the time."""
    binary, where = control_binary(), Path(pipe_dir) / CONTROL_SOCKET
    began = time.monotonic()
    deadline, delay, tries = began + retry.total_s, retry.first_s, 0
    while True:
        tries += 1
        try:
            done = subprocess.run([binary], input=command + "\n", env=mps_env(pipe_dir), capture_output=True,
                                  text=True, timeout=CONTROL_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise RuntimeFailure(f"{where}: no answer to {command!r} within {CONTROL_TIMEOUT_S:.0f}s") from None
        if done.returncode == 0:
            return done.stdout.strip()
        cause = (done.stderr.strip() + " " + done.stdout.strip()).strip()
        if not is_busy(cause):
            raise RuntimeFailure(f"{where}: {command!r} failed (exit {done.returncode}): {cause}")
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeFailure(f"{where}: {command!r} failed (exit {done.returncode}): the control daemon stayed "
                                 f"busy for {time.monotonic() - began:.1f}s over {tries} tries (the bound, "
                                 f"CONTROL_BUSY_RETRY_S, is {retry.total_s:g}s); last answer: {cause}")
        time.sleep(min(left, delay * _jitter.uniform(0.5, 1.5)))
        delay = min(delay * 2, retry.max_s)


def server_pids(pipe_dir: str) -> list[int]:
    """PIDs of the MPS servers this control daemon runs (a server starts with its first client)."""
    return [int(tok) for tok in control(pipe_dir, "get_server_list").split() if tok.isdigit()]


def find_control_pid(pipe_dir: str) -> int | None:
    """The control daemon serving `pipe_dir`: its pid file, else the process whose environment names it."""
    pid_file = Path(pipe_dir) / CONTROL_PID_FILE
    if pid_file.is_file():
        text = pid_file.read_text().strip()
        if text.isdigit() and proc_start_time(int(text)) is not None:
            return int(text)
    wanted = f"CUDA_MPS_PIPE_DIRECTORY={pipe_dir}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not (entry / "cmdline").read_bytes().split(b"\0")[0].endswith(CONTROL_BIN.encode()):
                continue
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                return int(entry.name)
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
    return None


@dataclass(frozen=True)
class StartRequest:
    gpus: str | None = None
    name: str | None = None
    pipe_dir: Path | None = None
    log_dir: Path | None = None


def start(request: StartRequest) -> DaemonRecord:
    """Start a daemon for one GPU, or return the live one already recorded under that name."""
    # Flags first: a bad name or pipe dir is refused before the host is even looked at.
    if request.name is not None:
        check_name(request.name)
    if request.pipe_dir is not None:
        check_socket_path(request.pipe_dir)
    binary = control_binary()
    gpu = select_gpus(request.gpus, query_gpus())[0]
    with records_lock():  # N runs started at once each ensure this daemon: one starts it, the rest reuse it
        return start_locked(request, binary, gpu)


def start_locked(request: StartRequest, binary: str, gpu: PhysicalGpu) -> DaemonRecord:
    name = request.name or default_name(gpu)
    existing = find_record(name)
    if existing is not None:
        state, why = existing.state()
        if state == LIVE:
            assert existing.record is not None
            if gpu.uuid not in existing.record.gpu_uuids:
                raise InvalidInput(f"--name={name}: a live daemon of that name serves "
                                   f"{', '.join(existing.record.gpu_uuids)}, not {gpu.uuid}; choose another --name")
            print(f"mps: {name} is already running ({why})")
            return existing.record
        if state == FOREIGN:
            raise InvalidInput(f"--name={name}: the record at {existing.path} is {why}; choose another --name")
        print(f"mps: quarantined stale record {existing.path} ({why}) -> {quarantine(existing, why)}")
    pipe_dir = request.pipe_dir or RUNTIME_ROOT / name / "pipe"
    log_dir = request.log_dir or RUNTIME_ROOT / name / "log"
    check_socket_path(pipe_dir)
    if request.pipe_dir is None:
        make_private_dir(RUNTIME_ROOT, "pipe-dir")
        make_private_dir(RUNTIME_ROOT / name, "pipe-dir")
    make_private_dir(pipe_dir, "pipe-dir")
    make_private_dir(log_dir, "log-dir")
    control_pipe = pipe_dir / CONTROL_SOCKET
    if is_socket(control_pipe):
        if find_control_pid(str(pipe_dir)) is not None:
            raise InvalidInput(f"--pipe-dir={pipe_dir}: an MPS daemon soaklab has no record of already listens on "
                               f"{control_pipe}; stop it with the tool that started it, or choose another --pipe-dir")
        control_pipe.unlink()  # a socket left by a daemon that died: nothing answers on it
    done = subprocess.run([binary, "-d"], env=mps_env(str(pipe_dir), str(log_dir), gpu.uuid),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=START_WAIT_S, check=False)
    if done.returncode != 0:
        raise RuntimeFailure(f"{CONTROL_BIN} -d: exit {done.returncode}: {(done.stderr or done.stdout).strip()} "
                             f"(see {log_dir}/control.log)")
    deadline = time.monotonic() + START_WAIT_S
    pid = None
    while time.monotonic() < deadline:
        pid = find_control_pid(str(pipe_dir))
        if pid is not None and is_socket(control_pipe):
            break
        time.sleep(0.1)
    started = proc_start_time(pid) if pid is not None else None
    if pid is None or started is None or not is_socket(control_pipe):
        raise RuntimeFailure(f"{CONTROL_BIN} -d: no control daemon on {control_pipe} after {START_WAIT_S:.0f}s "
                             f"(see {log_dir}/control.log)")
    record = DaemonRecord(name=name, uid=os.getuid(), host=socket.gethostname(), gpu_uuids=(gpu.uuid,),
                          pipe_dir=str(pipe_dir), log_dir=str(log_dir), control_pid=pid,
                          control_start_time=started, started_at=time.time())
    path = write_record(record)
    print(f"mps: started {name} on GPU {gpu.index} ({gpu.uuid}, {gpu.name}): control pid {pid}, pipe {pipe_dir}, "
          f"log {log_dir}; record {path}")
    return record


def target(name: str | None) -> LoadedRecord:
    """The record `env` and `stop` act on: the named one, else the single live one."""
    if name is not None:
        found = find_record(check_name(name))
        if found is None:
            raise InvalidInput(f"--name={name}: no soaklab record of that name in {record_dir(name).parent} "
                               "(soaklab acts only on daemons it started)")
        return found
    live = [r for r in load_records() if r.state()[0] == LIVE]
    if not live:
        raise InvalidInput("no live soaklab-recorded MPS daemon; start one with `soaklab mps start`")
    if len(live) > 1:
        raise InvalidInput(f"--name: {len(live)} live daemons ({', '.join(r.path.name for r in live)}); pass --name")
    return live[0]


def stop(name: str | None) -> bool:
    """Quit an owned daemon and drop its record (logs stay). False when there was nothing to stop."""
    if name is not None:
        check_name(name)  # a bad name is refused before the lock (and the records root) is touched
    with records_lock():
        return stop_locked(name)


def stop_locked(name: str | None) -> bool:
    if name is None and not any(r.state()[0] == LIVE for r in load_records()):
        for loaded in load_records():
            state, why = loaded.state()
            if state != FOREIGN:
                print(f"mps: quarantined stale record {loaded.path} ({why}) -> {quarantine(loaded, why)}")
        print("mps: no live soaklab-recorded MPS daemon; nothing to stop")
        return False
    loaded = target(name)
    state, why = loaded.state()
    if state == FOREIGN:
        raise InvalidInput(f"--name={loaded.path.name}: {why}; soaklab stops only daemons this user started here")
    if state != LIVE:
        print(f"mps: {loaded.path.name} is not running ({why}); record moved to {quarantine(loaded, why)}")
        return False
    record = loaded.record
    assert record is not None
    control(record.pipe_dir, "quit")
    deadline = time.monotonic() + STOP_WAIT_S
    while proc_start_time(record.control_pid) == record.control_start_time:
        if time.monotonic() > deadline:
            raise RuntimeFailure(f"mps: {record.name}: control pid {record.control_pid} still running "
                                 f"{STOP_WAIT_S:.0f}s after quit; record kept at {loaded.path}")
        time.sleep(0.1)
    shutil.rmtree(loaded.path)
    print(f"mps: stopped {record.name} (control pid {record.control_pid}); logs kept in {record.log_dir}")
    return True


def env_lines(name: str | None) -> list[str]:
    loaded = target(name)
    state, why = loaded.state()
    if state != LIVE or loaded.record is None:
        raise InvalidInput(f"--name={loaded.path.name}: not live ({why}); start it with `soaklab mps start`")
    return [f"export CUDA_MPS_PIPE_DIRECTORY={loaded.record.pipe_dir}",
            f"export CUDA_MPS_LOG_DIRECTORY={loaded.record.log_dir}"]


def status_lines() -> list[str]:
    """Read-only: every record with its state, and the topology modes."""
    lines = [f"topology {mode}: {what}" for mode, what in TOPOLOGY_MODES.items()]
    records = load_records()
    if not records:
        lines.append("no soaklab-recorded MPS daemons")
    for loaded in records:
        state, why = loaded.state()
        r = loaded.record
        gpus = ", ".join(r.gpu_uuids) if r else "?"
        lines.append(f"{loaded.path.name}: {state} ({why}); GPUs {gpus}; pipe {r.pipe_dir if r else '?'}")
    return lines


def doctor_checks(selector: str | None) -> list[tuple[bool, str]]:
    """Read-only checks, first failure first; (ok, line) each."""
    checks: list[tuple[bool, str]] = []
    for binary in (CONTROL_BIN, SERVER_BIN):
        path = shutil.which(binary)
        checks.append((path is not None, f"{binary}: {path or 'not on PATH'}"))
    try:
        gpus = select_gpus(selector, query_gpus(), allow_all=True)
    except InvalidInput as exc:
        return checks + [(False, str(exc))]
    for gpu in gpus:
        usable = gpu.compute_mode.lower() != "prohibited"
        checks.append((usable, f"GPU {gpu.index} {gpu.uuid} ({gpu.name}): compute mode {gpu.compute_mode}"))
        live = live_records(gpu.uuid)
        if not live:
            checks.append((True, f"GPU {gpu.index}: no live soaklab daemon (start one with `soaklab mps start`)"))
        for record in live:
            try:
                servers = server_pids(record.pipe_dir)
                checks.append((True, f"GPU {gpu.index}: {record.name} answers; servers {servers or 'none yet'}"))
            except RuntimeFailure as exc:
                checks.append((False, f"GPU {gpu.index}: {record.name}: {exc}"))
    writable = os.access(RUNTIME_ROOT.parent, os.W_OK)
    checks.append((writable, f"{RUNTIME_ROOT.parent}: {'writable' if writable else 'not writable'}"))
    for mode, what in TOPOLOGY_MODES.items():
        checks.append((True, f"topology {mode}: {what}"))
    return checks
