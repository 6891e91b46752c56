"""The mjlab PPO side-by-side benchmark: its time-out share, and failing closed where mjlab or its
inputs are missing (mjlab is not a soaklab dependency: CI has no mjlab)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pandas as pd
import pytest

from soaklab.bench.mjlab_ppo import summarise, timeout_shares
from tests.conftest import one_line


def terminations(rows: list[tuple[int, str, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"tag": f"Episode_Termination/{name}", "step": step, "value": value, "wall_time": 100.0 + step}
                         for step, name, value in rows], columns=["tag", "step", "value", "wall_time"])


def test_the_time_out_share_is_time_outs_over_every_ended_episode() -> None:
    frame = terminations([(0, "time_out", 0.0), (0, "ee_body_pos", 3.0), (0, "anchor_pos", 1.0),
                          (1, "time_out", 4.0), (1, "ee_body_pos", 1.0),
                          (2, "time_out", 0.0), (2, "anchor_ori", 0.0)])  # nothing ended: no share
    assert timeout_shares(frame) == {0: 0.0, 1: 0.8}
    result = summarise(frame, started=100.0, num_envs=8, steps_per_env=24)
    assert result["timeout_share_reached_at_iteration"] == 1
    assert result["timeout_share_reached_after_s"] == 1.0
    assert result["timeout_share_reached_at_env_steps"] == 2 * 8 * 24


def run(tmp_path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "soaklab.bench.mjlab_ppo", "--out", str(tmp_path / "out.json"),
                           "--log-dir", str(tmp_path / "log"), *flags], capture_output=True, text=True)


def test_a_bad_env_count_fails_closed_naming_it(tmp_path) -> None:
    result = run(tmp_path, "--num-envs", "0")
    assert result.returncode == 2
    assert "--num-envs 0: must be >= 1" in one_line(result.stderr)
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "log").exists()


def test_a_log_dir_holding_a_run_is_refused_and_kept(tmp_path) -> None:
    log = tmp_path / "log"
    log.mkdir()
    earlier = log / "events.out.tfevents.1.host.0"
    earlier.write_bytes(b"an earlier run")
    clip = tmp_path / "clip.npz"
    clip.write_bytes(b"")
    result = run(tmp_path, "--motion", str(clip))
    assert result.returncode == 2
    assert f"--log-dir {log}: already holds a run's event files" in one_line(result.stderr)
    assert earlier.read_bytes() == b"an earlier run" and not (tmp_path / "out.json").exists()


def test_an_out_folder_that_does_not_exist_is_named(tmp_path) -> None:
    clip = tmp_path / "clip.npz"
    clip.write_bytes(b"")
    result = subprocess.run([sys.executable, "-m", "soaklab.bench.mjlab_ppo", "--motion", str(clip),
                             "--out", str(tmp_path / "missing" / "out.json")], capture_output=True, text=True)
    assert result.returncode == 2
    assert "missing/out.json: its folder" in one_line(result.stderr)


@pytest.mark.skipif(importlib.util.find_spec("mjlab") is not None, reason="mjlab is installed here")
def test_without_mjlab_it_says_what_to_stage_and_writes_nothing(tmp_path) -> None:
    clip = tmp_path / "clip.npz"
    clip.write_bytes(b"")
    result = run(tmp_path, "--motion", str(clip), "--device", "cpu")
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith("mjlab_ppo: error: mjlab: cannot import it") and "scripts/gpu/README.md" in line
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "log").exists()


def test_the_stand_ins_let_mjlab_import_headless_and_fail_on_use() -> None:
    # A fresh interpreter: the stand-ins change sys.modules and the environment of whoever calls them.
    # It hides an installed wandb (the wandb extra) the way Python documents, as on a host without it.
    probe = ("import os, sys\n"
             "sys.modules['wandb'] = None\n"
             "os.environ.pop('MUJOCO_GL', None)\n"
             "from soaklab.bench.mjlab_ppo import stand_in_for_the_unused\n"
             "stand_in_for_the_unused()\n"
             "import imageio_ffmpeg, wandb\n"
             "print(os.environ['MUJOCO_GL'], imageio_ffmpeg.get_ffmpeg_exe())\n"
             "try:\n    wandb.init()\nexcept RuntimeError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    if importlib.util.find_spec("imageio_ffmpeg") is None:
        assert lines[0] == "disable ffmpeg"
    else:
        assert lines[0].startswith("disable ")
    assert lines[1].startswith("wandb.init: wandb is not installed")
