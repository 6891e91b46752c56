"""What checkpoints cost a run, read from a real finished run (soaklab.bench.checkpoint_cost)."""

from __future__ import annotations

import json
import subprocess
import sys


def cost(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "soaklab.bench.checkpoint_cost", *args],
                          capture_output=True, text=True, timeout=120)


def test_bytes_and_seconds_of_a_real_runs_checkpoints(start_train, tmp_path):
    run = start_train("algo.max_iterations=60", "algo.replay_buffer_size=200", "algo.save_interval=10")
    assert run.wait() == 0, run.output()
    done = cost(str(run.run_dir), "--steady-from", "5", "--out", str(tmp_path / "cost.json"), "--source", "a test")
    assert done.returncode == 0, done.stderr
    out = json.loads((tmp_path / "cost.json").read_text())
    assert out["source"] == "a test" and out["command"].endswith("--source a test")
    [read] = out["runs"]
    # checkpoints at 10..50 have two iterations either side inside the run; each is timed once
    assert read["checkpoints_timed"] == 5 == len(read["seconds_per_checkpoint"]["each"])
    assert read["median_iteration_ms"] > 0
    assert read["replay_rows_filled"] == 200, "50 iterations of 8 envs fill the 200-row ring"
    last = read["last_checkpoint_iteration"]
    resume = run.run_dir / "resume"
    assert read["bytes_last"] == {"learner": (resume / f"learner_{last}.pt").stat().st_size,
                                  "collector": (resume / f"collector_{last}.pt").stat().st_size}
    assert read["checkpoints_written"] >= 5 and read["learner_seconds_last"] > 0


def test_a_dir_that_is_not_a_finished_run_is_refused(tmp_path):
    done = cost(str(tmp_path), "--out", str(tmp_path / "cost.json"))
    assert done.returncode == 1 and "no run_summary.json" in done.stderr
    assert not (tmp_path / "cost.json").exists()
