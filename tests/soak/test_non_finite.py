"""A real soak whose collector is made to hand on a NaN reward (SOAKLAB_FAULT=nan_reward@N): the run
ends non_finite naming the term and the iteration, and every command that reads it fails closed."""

from __future__ import annotations

import json

from tests.soak.conftest import assert_nothing_downstream_passes


def test_a_nan_reward_ends_the_run_non_finite_and_nothing_passes(start_soak):
    run = start_soak(iterations=30, fault="nan_reward@5")
    assert run.wait() != 0, run.out()
    soak = run.soak
    # The soak record and the trainer's whole output, printed (pytest shows them in full on a failure,
    # where an assertion message is cut). CI saw collector_failure here ("collector exited during
    # startup") when another test unlinked this run's semaphores before its collector opened them
    # (tests/rl/test_shm.py's cleanup, since fixed).
    print(json.dumps(soak, indent=1), run.out(), sep="\n")
    assert soak["status"] == "failed" and soak["failure_classification"] == "non_finite"
    assert "non-finite reward (term " in soak["failure_reason"] and "at iteration 5" in soak["failure_reason"]
    summary = json.loads((run.log_dir / "run_summary.json").read_text())
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert summary["status"] == "failed" and shutdown["classification"] == "non_finite"
    assert summary["completed_iterations"] <= 6  # it stopped there, not at the end
    report = json.loads((run.log_dir / "non_finite.json").read_text())
    assert report["iteration"] == 5 and report["tensor"] == "reward" and report["term"]

    assert_nothing_downstream_passes(run, "non_finite")
