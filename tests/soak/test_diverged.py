"""Runs whose physics blew up while every number stayed finite (soaklab.rl.diverged): real soaks and
trainers end `diverged`, naming what, and nothing downstream passes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from soaklab.soak.interrupted import kept_runs
from tests.soak.conftest import assert_nothing_downstream_passes


def soaklab(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "soaklab", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize(("overrides", "words"), [
    # A reset velocity of 1e12: MuJoCo warns "The simulation is unstable" on each reset and puts the
    # cart-pole back at its default pose, where the episode would carry on as if nothing happened.
    (("task.reset_noise.velocity=1e12",), "physics_unstable at iteration 0: the simulator reset envs as unstable "
                                          "8 times"),
    # Both learning rates at 1.0, the top of their range: every number stays finite while the critic
    # loss grows from ~1e4 to 1e27 (it would end `completed` without the rule).
    (("algo.actor_lr=1.0", "algo.critic_lr=1.0"), "loss_exploded at iteration 22: Loss/critic = 1.414e+11, over "
                                                  "10^6 times its reference 2.069e+04"),
], ids=["physics_unstable", "loss_exploded"])
def test_a_run_that_blows_up_ends_the_soak_diverged_and_nothing_passes(start_soak, overrides, words):
    run = start_soak(*[a for o in overrides for a in ("--extra-override", o)], iterations=30)
    assert run.wait() == 1, run.out()
    soak = run.soak
    assert soak["status"] == "failed" and soak["failure_classification"] == "diverged"
    assert words in soak["failure_reason"]
    assert words in run.out()  # and on the console
    summary = json.loads((run.log_dir / "run_summary.json").read_text())
    assert summary["status"] == "failed" and summary["runtime_manifest"]["shutdown"]["classification"] == "diverged"
    assert kept_runs(run.log_dir) == [], "a diverged run is not kept to resume"
    assert_nothing_downstream_passes(run, "diverged")


def test_episodes_that_collapse_after_every_reset_end_the_run_diverged(tmp_path, g1_assets):
    """G1 with 50 rad of joint noise at each reset: every episode ends within a step or two."""
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "soaklab", "train", "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim",
         "mujoco", "--assets-manifest", g1_assets.manifest_path, "algo.num_envs=8", "algo.max_iterations=200",
         "algo.batch_size=32", "algo.learning_starts=4", "env.num_threads=1", "task.reset_noise.joint_pos=50.0",
         f"training.log_dir={run_dir}", "--skip-post-training"],
        env={**os.environ, "SOAKLAB_TORCH_COMPILE": "0"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads((run_dir / "run_summary.json").read_text())
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert shutdown["classification"] == "diverged" and summary["completed_iterations"] < 200
    assert "collapsed_episodes at iteration" in shutdown["exception"]["message"]
    assert "of the last 100 episodes ended within 2 steps of their reset" in shutdown["exception"]["message"]
    assert "error: diverged: " in done.stderr
