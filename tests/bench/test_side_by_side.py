"""The FlashSAC / mjlab side-by-side join: its rows from the inputs the test writes (mjlab's figures
re-read from a real TensorBoard event file), and failing closed on inputs that do not fit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from torch.utils.tensorboard import SummaryWriter

from tests.conftest import one_line

ENVS = 8


def mjlab_inputs(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "mjlab-ppo"
    writer = SummaryWriter(str(log))
    started = 1000.0
    # Iteration i logged at started + 10 (i + 1): time-outs 0, 1, 4 of 4 ended episodes.
    for step, timeouts in enumerate((0.0, 1.0, 4.0)):
        wall = started + 10 * (step + 1)
        writer.add_scalar("Episode_Termination/time_out", timeouts, step, walltime=wall)
        writer.add_scalar("Episode_Termination/anchor_pos", 4.0 - timeouts, step, walltime=wall)
        writer.add_scalar("Metrics/motion/error_body_pos", 0.3 - 0.1 * step, step, walltime=wall)
        writer.add_scalar("Train/mean_episode_length", 100.0 * (step + 1), step, walltime=wall)
        writer.add_scalar("Perf/total_fps", 1000.0 * (step + 1), step, walltime=wall)
    writer.close()
    # As bench.mjlab_ppo wrote it before it summarised the tracking figures: share and seconds only.
    record = {"kind": "mjlab_ppo", "command": "python3 -m soaklab.bench.mjlab_ppo", "git": {"commit": "a"},
              "versions": {"mjlab": "1.6.0", "rsl-rl-lib": "5.4.2"}, "settings": {"num_envs": ENVS, "minutes": 1.0},
              "results": {"iterations": 3, "env_steps_per_iteration": ENVS * 24, "steady_env_steps_per_s": 2000.0,
                          "timeout_share_reached_after_s": None, "timeout_share_reached_at_env_steps": None,
                          "final_timeout_share": 1.0,
                          "curve": [{"iteration": 0, "timeout_share": 0.0, "seconds": 10.0}]}}
    path = tmp_path / "mjlab_ppo.json"
    path.write_text(json.dumps(record))
    return path, log


def flashsac_inputs(tmp_path: Path, num_envs: int = ENVS) -> tuple[Path, Path, Path]:
    curve = [{"iteration": 0, "wall_s": 5.0, "timeout_fraction": None, "body_pos_error_m": 0.0, "episode_length": 1.0},
             {"iteration": 10, "wall_s": 20.0, "timeout_fraction": 0.5, "body_pos_error_m": 0.2,
              "episode_length": 50.0},
             {"iteration": 30, "wall_s": 40.0, "timeout_fraction": 0.9, "body_pos_error_m": 0.05,
              "episode_length": 90.0}]
    record = {"kind": "g1_learning_curve", "num_envs": num_envs, "curve": curve, "host": {"hostname": "here"},
              "final": {"timeout_fraction": 0.9, "body_pos_error_m": 0.05, "episode_length": 90.0},
              "total_env_steps": 31 * num_envs, "budget_minutes": 1.0, "command": "g1_learning run", "git": {}}
    phases = {"steady_state": {"env_steps_per_s": 5000.0}, "end_to_end_env_steps_per_s": 4000.0}
    ceiling = {"njmax": 256, "device": "cpu", "runs": [{"worlds": num_envs, "env_steps_per_s": 10000.0,
                                                        "control_step_ms_median": 1.0}]}
    paths = []
    for name, payload in (("flashsac.json", record), ("phases.json", phases), ("ceiling.json", ceiling)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(payload))
    return paths[0], paths[1], paths[2]


def join(tmp_path: Path, mjlab: Path, log: Path, flashsac: Path, phases: Path, ceiling: Path,
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "soaklab.bench.side_by_side", "--mjlab", str(mjlab),
                           "--mjlab-log", str(log), "--flashsac", str(flashsac), "--phases", str(phases),
                           "--ceiling", str(ceiling), "--out", str(tmp_path / "sbs.json")],
                          capture_output=True, text=True)


def test_the_rows_come_from_the_inputs_and_mjlab_is_re_read_from_its_events(tmp_path) -> None:
    mjlab, log = mjlab_inputs(tmp_path)
    result = join(tmp_path, mjlab, log, *flashsac_inputs(tmp_path))
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "sbs.json").read_text())
    flashsac_row, mjlab_row = record["rows"]
    assert flashsac_row["timeout_share_reached_after_s"] == 40.0
    assert flashsac_row["timeout_share_reached_at_env_steps"] == 30 * ENVS
    assert flashsac_row["share_of_ceiling"] == 0.5
    assert [p["seconds"] for p in flashsac_row["curve"]] == [20.0, 40.0]  # no episode ended at 5 s
    # Re-read from the event file: share 1.0 first at iteration 2, 30 s after the start of learning.
    assert mjlab_row["timeout_share_reached_after_s"] == 30.0
    assert mjlab_row["timeout_share_reached_at_env_steps"] == 3 * ENVS * 24
    assert abs(mjlab_row["final_body_error_m"] - 0.2) < 1e-6 and mjlab_row["final_episode_length"] == 200.0
    assert mjlab_row["steady_env_steps_per_s"] is None  # every iteration is inside mjlab_ppo's warm-up
    assert (tmp_path / "sbs.png").stat().st_size > 0


def test_another_env_count_is_refused_and_nothing_written(tmp_path) -> None:
    mjlab, log = mjlab_inputs(tmp_path)
    result = join(tmp_path, mjlab, log, *flashsac_inputs(tmp_path, num_envs=2 * ENVS))
    assert result.returncode == 2
    assert f"{ENVS} envs, FlashSAC's run {2 * ENVS}" in one_line(result.stderr)
    assert not (tmp_path / "sbs.json").exists()


def test_an_input_of_another_kind_is_named(tmp_path) -> None:
    mjlab, log = mjlab_inputs(tmp_path)
    flashsac, phases, ceiling = flashsac_inputs(tmp_path)
    result = join(tmp_path, phases, log, flashsac, phases, ceiling)
    assert result.returncode == 2
    assert f"--mjlab {phases}: kind None, expected 'mjlab_ppo'" in one_line(result.stderr)
    flashsac.write_text("{")
    result = join(tmp_path, mjlab, log, flashsac, phases, ceiling)
    assert result.returncode == 2 and f"--flashsac {flashsac}: not JSON (" in one_line(result.stderr)
    assert not (tmp_path / "sbs.json").exists()


def test_a_json_missing_a_field_is_named(tmp_path) -> None:
    mjlab, log = mjlab_inputs(tmp_path)
    flashsac, phases, ceiling = flashsac_inputs(tmp_path)
    phases.write_text(json.dumps({"steady_state": {"env_steps_per_s": 1.0}}))  # no end-to-end figure
    result = join(tmp_path, mjlab, log, flashsac, phases, ceiling)
    assert result.returncode == 2
    assert "missing or malformed field 'end_to_end_env_steps_per_s'" in one_line(result.stderr)
    flashsac, phases, ceiling = flashsac_inputs(tmp_path)
    ceiling.write_text(json.dumps({"njmax": 256}))
    result = join(tmp_path, mjlab, log, flashsac, phases, ceiling)
    assert result.returncode == 2
    assert f"--ceiling {ceiling}: missing or malformed field 'runs'" in one_line(result.stderr)
    assert not (tmp_path / "sbs.json").exists()
