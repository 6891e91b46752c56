"""Run the real trainer (`python -m soaklab train`) as a subprocess, on the small control task."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from soaklab.config.overrides import merge_overrides
from soaklab.metrics.same_run import first_difference, series
from soaklab.rl.shm import leaked_segments, segment_prefix

# Small networks and batches: these tests check the runtime's mechanics, not learning.
FAST = ("algo.num_envs=8", "algo.learning_starts=4", "algo.batch_size=32", "algo.actor_hidden=32",
        "algo.critic_hidden=32", "algo.num_blocks=1", "algo.save_interval=10", "env.num_threads=1",
        "training.export_onnx=false", "training.no_play=true")  # tests/policy/test_export.py covers those


@dataclass
class TrainRun:
    proc: subprocess.Popen
    run_dir: Path
    started: float

    def wait(self, timeout: float = 120) -> int:
        return self.proc.wait(timeout=timeout)

    @property
    def summary(self) -> dict:
        return json.loads((self.run_dir / "run_summary.json").read_text())

    @property
    def manifest(self) -> dict:
        return self.summary["runtime_manifest"]

    def iteration(self) -> int:
        try:
            return json.loads((self.run_dir / "progress.json").read_text())["iteration"]
        except (OSError, ValueError):
            return -1

    def wait_for_iteration(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.iteration() < n:
            assert self.proc.poll() is None, "trainer exited early"
            assert time.monotonic() < deadline, f"no progress to iteration {n}"
            time.sleep(0.1)

    def output(self) -> str:
        return self.proc.stdout.read() if self.proc.stdout else ""


@pytest.fixture
def start_train(tmp_path):
    runs: list[TrainRun] = []

    def start(*overrides: str, algo: str = "sac", fault: str | None = None, name: str = "run",
              run_dir: Path | None = None, reclaim: bool = False, env_vars: dict[str, str] | None = None) -> TrainRun:
        run_dir = run_dir or tmp_path / name
        env = dict(os.environ, SOAKLAB_TORCH_COMPILE="0", PYTHONUNBUFFERED="1",
                   SOAKLAB_SHM_RECLAIM_AT_START="1" if reclaim else "0")  # off suite-wide: tests/conftest.py
        env.pop("SOAKLAB_FAULT", None)
        env.update(env_vars or {})
        if fault:
            env["SOAKLAB_FAULT"] = fault
        cmd = [sys.executable, "-m", "soaklab", "train", "--algo", algo, "--task", "cartpole_swingup", "--sim",
               "mujoco", *merge_overrides(list(FAST), list(overrides)), f"training.log_dir={run_dir}"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        run = TrainRun(proc, run_dir, time.monotonic())
        runs.append(run)
        return run

    yield start
    killed = []
    for run in runs:
        if run.proc.poll() is None:  # the test failed or gave up on it: end it, clean up after it
            os.killpg(run.proc.pid, signal.SIGKILL)
            run.proc.wait()
            killed.append(run.proc.pid)
    for name in own_segments(killed):  # a group SIGKILL takes the resource tracker with it
        Path("/dev/shm", name).unlink(missing_ok=True)
    # Only this test's trainers: another soaklab run on the host may own segments meanwhile.
    leftover = own_segments(run.proc.pid for run in runs)
    assert not leftover, f"shared memory left in /dev/shm: {leftover}"


def own_segments(pids: Iterable[int]) -> list[str]:
    """The /dev/shm segments named for these learner processes (of this pid namespace)."""
    prefixes = tuple(segment_prefix(pid) for pid in pids)
    return [name for name in leaked_segments() if prefixes and name.startswith(prefixes)]


def process_gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- a crafted checkpoint (a run dir from elsewhere is data: soaklab.files.checkpoints.load_weights) -------
class Payload:
    """What a crafted checkpoint can hold: unpickling it opens, and so creates, `marker` (any code
    could run there instead). A load as data refuses it without calling anything."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (open, (str(self.marker), "w"))


def craft(path: Path, marker: Path, **fields: object) -> Path:
    """A torch checkpoint at `path` with the fields a real one has and the payload beside them."""
    import torch

    torch.save({**fields, "payload": Payload(marker)}, path)
    return path


# -- the same run, bit for bit (a resumed run against the unbroken one) -----------------------------------
def assert_same_run(resumed: Path, unbroken: Path) -> None:
    assert len(series(unbroken)) >= 5  # a run that logged little would make the comparison weak
    assert first_difference(resumed, unbroken) is None
