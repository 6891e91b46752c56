"""Wall-clock budgets (training.max_wall_minutes): a run that spends its budget ends `completed`
with the stop reason `time_budget` after a whole iteration, its final checkpoint and event rows
written; a resumed run counts the time of the segments it kept."""

from __future__ import annotations

import json

import torch

from soaklab.files.checkpoints import learner_path
from soaklab.metrics.events import event_file, read_scalars
from tests.conftest import one_line
from tests.rl.test_resume import KILL_AT, train

# Far more iterations than any machine runs in the budget; the budget (30 ms) is spent before the
# first iteration ends, since the learner's clock starts before the collector is spawned.
ENDLESS = "algo.max_iterations=100000000"
TINY_BUDGET = "training.max_wall_minutes=0.0005"


def test_a_spent_budget_ends_the_run_completed_with_its_final_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    done = train(run_dir, ENDLESS, TINY_BUDGET)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert summary["status"] == "completed" and summary["stop_reason"] == "time_budget"
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert shutdown["classification"] == "normal_completion" and shutdown["stop_reason"] == "time_budget"
    iterations = summary["completed_iterations"]
    assert 1 <= iterations < 100_000_000
    assert f"time budget of 0.0005 min spent at iteration {iterations} of 100000000" in done.stdout
    [segment] = summary["segments"]
    code = segment.pop("code")  # what the segment ran (soaklab.host.run_code): tests/rl/test_resume.py's
    assert segment == {"start_iteration": 0, "resumed_from_checkpoint": None, "end_iteration": iterations,
                       "cause": "time_budget"} and code["sources_sha256"].startswith("sha256:")
    final = torch.load(run_dir / "checkpoints" / "model_final.pt", weights_only=True)
    assert final["iteration"] == iterations and final["env_steps"] == summary["total_env_steps"]
    # the policy checkpoint carries the training time from launch the budget counted (start-up included)
    assert final["elapsed_s"] >= 0.0005 * 60
    # Every iteration it ran is in the event file: none was cut off by the stop.
    steps = read_scalars(event_file(run_dir)).query("tag == 'Train/step_reward'").step
    assert steps.max() == iterations - 1
    # A completed run is not resumed.
    again = train(run_dir, resume=True)
    assert again.returncode == 2 and "completed" in one_line(again.stderr)


def test_a_run_without_a_budget_says_it_ran_every_iteration(tmp_path):
    done = train(tmp_path / "run")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert summary["stop_reason"] == "max_iterations" and summary["completed_iterations"] == 60
    assert summary["segments"][-1]["cause"] == "max_iterations"


def test_a_resumed_run_counts_the_time_of_the_segments_it_kept(tmp_path):
    """The budget is wall time of the iterations the run holds: the checkpoint carries it, and a
    resume whose kept time already exceeds the budget stops after its first iteration."""
    run_dir = tmp_path / "run"
    killed = train(run_dir, "training.max_wall_minutes=600", fault=f"kill_learner@{KILL_AT}")
    assert killed.returncode != 0
    learner = torch.load(learner_path(run_dir, 40), weights_only=True)
    assert learner["elapsed_s"] > 0
    # The kept time is what the budget sees on resuming: set it beyond the budget.
    learner["elapsed_s"] = 600 * 60.0
    torch.save(learner, learner_path(run_dir, 40))
    resumed = train(run_dir, resume=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert summary["stop_reason"] == "time_budget" and summary["completed_iterations"] == 41
    assert [s["cause"] for s in summary["segments"]] == ["killed (no shutdown recorded)", "time_budget"]
