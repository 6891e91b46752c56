"""W&B beside TensorBoard with the real library, offline (soaklab.rl.wandb_sink): the same scalars at
the same steps, one W&B run for a two-rank run, the resolved config as the run's config, and a W&B
failure that stops only W&B."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from soaklab.metrics.events import event_file, read_scalars
from soaklab.metrics.tags import ITERATION_TAG
from soaklab.metrics.wandb_offline import read_offline_run
from tests.rl.test_ranks import RANKS

pytest.importorskip("wandb", reason="the wandb extra (pip install 'soaklab[wandb]')")

WANDB = "training.loggers=[tensorboard,wandb]"
SERIES = ("Train/", "Loss/")


def offline_runs(folder: Path) -> list[Path]:
    return sorted((folder / "wandb").glob("offline-run-*"))


def tensorboard_series(run_dir: Path) -> dict[str, dict[int, float]]:
    frame = read_scalars(event_file(run_dir))
    return {tag: dict(zip(rows["step"].astype(int), rows["value"], strict=True))
            for tag, rows in frame.groupby("tag") if tag.startswith(SERIES)}


def assert_same_series(run_dir: Path, history: dict[str, dict[int, float]]) -> int:
    """Every Train/ and Loss/ series of the event file is W&B's, step for step (TensorBoard keeps
    float32); returns how many points were compared."""
    board = tensorboard_series(run_dir)
    assert board, "the event file has no Train/ or Loss/ series"
    assert sorted(board) == sorted(tag for tag in history if tag.startswith(SERIES))
    compared = 0
    for tag, points in board.items():
        assert sorted(points) == sorted(history[tag]), tag
        for step, value in points.items():
            assert np.float32(history[tag][step]) == np.float32(value), (tag, step)
            compared += 1
    return compared


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("WANDB_MODE", "WANDB_DIR", "WANDB_NAME", "WANDB_RUN_GROUP", "WANDB_TAGS", "MUJOCO_GL", "DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    return dict(os.environ, SOAKLAB_TORCH_COMPILE="0")


def test_two_ranks_make_one_wandb_run(start_train, clean_env, monkeypatch):
    monkeypatch.setenv("WANDB_RUN_GROUP", "sweep-x")  # what the DAG sets for a sweep's runs
    run = start_train(*RANKS, WANDB, "algo.max_iterations=30", "training.wandb_project=soaklab-tests")
    assert run.wait() == 0, run.output()
    # Offline by default (no account, no network). Rank 0 alone logs: one W&B run, its training
    # folder, then the one the end of the run adds its figures with (post-training's `soaklab wandb summary`).
    folder, summary_folder = offline_runs(run.run_dir)
    history, end = read_offline_run(folder), read_offline_run(summary_folder)
    assert end.run_id == history.run_id and end.history == {}
    assert end.summary["train/status"] == "completed" and end.summary["train/completed_iterations"] == 30
    assert history.project == "soaklab-tests" and history.group == "sweep-x"
    assert assert_same_series(run.run_dir, history.history) > 50
    # The resolved run config is the run's config (a G1 run's series: tests/workflow/test_dag.py, its whole-DAG test).
    assert history.config["config_hash"] == json.loads((run.run_dir / "run_config.json").read_text())["config_hash"]
    assert history.config["config"]["training"]["loggers"] == ["tensorboard", "wandb"]
    loggers = run.summary["loggers"]
    assert loggers["wandb"] == {"state": "ok", "reason": None, "mode": "offline", "run_folder": str(folder)}
    assert loggers["tensorboard"]["state"] == "ok"
    # The rows are rank 0's combined ones: the replay size sums both ranks' rows, as TensorBoard has it.
    sizes = history.history["Replay/size"]
    assert sizes == {step: 2.0 * (step + 1) * 8 for step in range(30)}


def test_a_full_wandb_folder_stops_wandb_not_training(start_train, tmpfs, clean_env, monkeypatch):
    disk = tmpfs("4m")
    monkeypatch.setenv("WANDB_DIR", str(disk))
    # Bounded by iterations, not by a wall-clock budget: under load a 30 s budget once ran out before
    # the sink's first log after the fill (W&B ended "ok"). The fill comes hundreds of iterations
    # before the end however slow the machine, since the run slows with it.
    run = start_train(WANDB, "algo.max_iterations=1000")
    run.wait_for_iteration(20, timeout=120)
    # Fill W&B's disk for real, leaving less than the sink's margin.
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(b"\0" * max(free - 256 * 1024, 0))
    assert run.wait(timeout=300) == 0, run.output()
    summary = run.summary
    assert summary["status"] == "completed" and summary["stop_reason"] == "max_iterations"
    wandb_state = summary["loggers"]["wandb"]
    assert wandb_state["state"] == "stopped", wandb_state
    assert "bytes free" in wandb_state["reason"] and str(disk) in wandb_state["reason"]
    # ... and the console said so once, when it happened
    notices = [line for line in run.output().splitlines() if line.startswith("train: W&B stopped logging")]
    assert len(notices) == 1 and wandb_state["reason"] in notices[0], notices
    assert summary["loggers"]["tensorboard"]["state"] == "ok"
    # TensorBoard kept every iteration; W&B's run ends where it stopped, short of the last iteration.
    frame = read_scalars(event_file(run.run_dir))
    iterations = frame[frame["tag"] == ITERATION_TAG]["step"]
    assert len(iterations) == summary["completed_iterations"]
    (folder,) = offline_runs(disk)
    logged = read_offline_run(folder).history[ITERATION_TAG]
    assert 20 <= len(logged) < summary["completed_iterations"]
