"""What a completed standalone run does last (docs/export.md, "At the end of training"):
`training.export_onnx` writes policy.onnx with its parity check, and unless `training.no_play` a
short playback, both into the run dir; with wandb among `training.loggers`, the run's figures and
those files go into its W&B run (`soaklab wandb summary`). Soaks skip it (the monitor says so); `snakemake play` makes
both for soaked runs.

Each step is `soaklab export` / `soaklab play` in a process of its own: MuJoCo picks its GL backend
once per process, and a failing step (no GL, no disk) is recorded in post_training.json and named
in one line, never turning a completed run into a failed one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from soaklab.contract.sections import TrainingConfig
from soaklab.files.jsonfiles import write_json_atomic

RECORD = "post_training.json"
WANDB_RECORD = "wandb.json"  # soaklab.outcomes.wandb_summary: the W&B folders and how to upload them
PLAY_SECONDS = 5.0
STEP_TIMEOUT_S = 1800  # a bound for a hung step, not an expectation


def post_training(run_dir: Path, training: TrainingConfig) -> dict[str, Any]:
    steps: dict[str, Any] = {}
    if training.export_onnx:
        steps["export"] = _step(["export", str(run_dir), "--out", str(run_dir / "policy.onnx")])
    if not training.no_play:
        steps["play"] = _step(["play", str(run_dir), "--out", str(run_dir / "play.mp4"), "--seconds",
                               str(PLAY_SECONDS)])
    if "wandb" in training.loggers:  # the training's figures and these files into its W&B run
        files = [f for name in ("policy.onnx", "play.mp4") if (f := run_dir / name).is_file()]
        steps["wandb"] = _step(["wandb", "summary", str(run_dir), *(a for f in files for a in ("--artifact", str(f))),
                                "--out", str(run_dir / WANDB_RECORD)])
    if steps:
        write_json_atomic(run_dir / RECORD, steps)
    return steps


def _step(args: list[str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "soaklab", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        line, code = f"{type(exc).__name__}: {exc}", None
    else:
        text = (done.stdout if done.returncode == 0 else done.stderr or done.stdout).strip().splitlines()
        line, code = (text[-1] if text else ""), done.returncode
    status = "written" if code == 0 else "failed"
    if code == 0:  # the command's own summary line (it starts with its name)
        print(f"train: {line}", flush=True)
    else:
        print(f"train: {args[0]} failed: {line}", file=sys.stderr, flush=True)
    return {"command": " ".join(["soaklab", *args]), "exit_code": code, "status": status, "line": line}
