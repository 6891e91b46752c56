"""Run the real monitor (`python -m soaklab soak`) over the real trainer on the small control task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.rl.conftest import FAST, own_segments

# The monitor owns algo.num_envs; everything else of the fast runtime settings passes through.
EXTRA = [o for o in FAST if not o.startswith("algo.num_envs=")]
QUICK_BUDGET = {"min-duration-seconds": 1, "sample-interval-seconds": 0.25, "startup-timeout-seconds": 60,
                "stale-progress-seconds": 20, "post-shutdown-grace-seconds": 1}


@dataclass
class SoakRun:
    proc: subprocess.Popen
    log_dir: Path
    output: Path
    evidence: Path

    def wait(self, timeout: float = 180) -> int:
        return self.proc.wait(timeout=timeout)

    @property
    def soak(self) -> dict:
        return json.loads(self.output.read_text())

    def out(self) -> str:
        return self.proc.stdout.read() if self.proc.stdout else ""


@pytest.fixture
def start_soak(tmp_path):
    runs: list[SoakRun] = []

    def start(*flags: str, iterations: int = 30, fault: str | None = None, name: str = "soak",
              output: Path | None = None, **budget: float) -> SoakRun:
        env = dict(os.environ, SOAKLAB_TORCH_COMPILE="0", PYTHONUNBUFFERED="1")
        env.pop("SOAKLAB_FAULT", None)
        if fault:
            env["SOAKLAB_FAULT"] = fault
        values = {**QUICK_BUDGET, **{k.replace("_", "-"): v for k, v in budget.items()}}
        run = SoakRun(None, tmp_path / name / "run", output or tmp_path / name / "soak.json",  # type: ignore[arg-type]
                      tmp_path / name / "evidence")
        cmd = [sys.executable, "-m", "soaklab", "soak", "--algo", "sac", "--task", "cartpole_swingup",
               "--sim", "mujoco", "--num-envs", "8", "--iterations", str(iterations),
               *[a for k, v in values.items() for a in (f"--{k}", str(v))],
               *[a for o in EXTRA for a in ("--extra-override", o)], *flags,
               "--log-dir", str(run.log_dir), "--output", str(run.output), "--evidence-dir", str(run.evidence)]
        run.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        runs.append(run)
        return run

    yield start
    for run in runs:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
    # Only the processes these soaks ran (from their soak JSON): other runs on the host may own
    # segments meanwhile.
    pids = {p["pid"] for run in runs if run.output.is_file()
            for sample in json.loads(run.output.read_text()).get("samples", []) for p in sample["processes"]}
    assert own_segments(pids) == [], "a soak left /dev/shm segments behind"


def assert_nothing_downstream_passes(run: SoakRun, classification: str) -> None:
    """A run that ended `classification` (non_finite, diverged): `soaklab metrics` refuses it in one
    line and writes nothing, and `soaklab validate` fails it."""
    from tests.conftest import one_line

    def soaklab(*args: object) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "soaklab", *map(str, args)], capture_output=True, text=True,
                              timeout=300)

    metrics = soaklab("metrics", run.log_dir, "--out", run.log_dir.parent / "metrics.json")
    assert metrics.returncode == 2 and f"ended {classification}" in one_line(metrics.stderr)
    assert not (run.log_dir.parent / "metrics.json").exists()
    validation = soaklab("validate", "--soak", run.output, "--run-dir", run.log_dir,
                         "--out", run.log_dir.parent / "validation.json")
    assert validation.returncode != 0
    assert json.loads((run.log_dir.parent / "validation.json").read_text())["status"] == "failed"
