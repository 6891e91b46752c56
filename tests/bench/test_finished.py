"""A benchmark given a failed run reports its cause in one line and exits 1, never a traceback
(soaklab.bench.finished), on a real run that failed at its first iteration."""

from __future__ import annotations

import subprocess
import sys

import pytest

from soaklab.bench.finished import RunFailed, completed_summary
from soaklab.bench.g1_learning import curves
from tests.conftest import one_line


def bench(module: str, *args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"soaklab.bench.{module}", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_a_failed_run_is_reported_with_its_cause(start_train, tmp_path):
    run = start_train("algo.max_iterations=20", fault="raise_learner@0")
    assert run.wait() == 1, run.output()
    with pytest.raises(RunFailed, match="the run failed at iteration 0: learner_failure: RuntimeError: "
                                        "injected learner fault at iteration 0"):
        completed_summary(run.run_dir)
    with pytest.raises(RunFailed, match="no Perf/iteration_ms rows"):  # what g1_learning read into an IndexError
        curves(run.run_dir)
    for module, args in (("checkpoint_cost", (run.run_dir, "--out", tmp_path / "cost.json")),
                         ("gpu_phases", (run.run_dir, "--out", tmp_path / "phases.json"))):
        done = bench(module, *args)
        assert done.returncode == 1, done.stderr
        assert "injected learner fault at iteration 0" in one_line(done.stderr)
    assert not (tmp_path / "cost.json").exists() and not (tmp_path / "phases.json").exists()

