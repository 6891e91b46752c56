"""A run's outcome read from its files (soaklab.outcomes.runs): verdicts recomputed, stale ones dropped."""

from __future__ import annotations

import json
import os
from pathlib import Path

from soaklab.outcomes.runs import run_lines, run_outcome

CHECKS = [{"name": "monitor status", "expected": "passed", "actual": "passed", "passed": True},
          {"name": "leak verdict", "expected": False, "actual": False, "passed": True}]


def write(path: Path, value: dict, mtime: float) -> None:
    path.write_text(json.dumps(value))
    os.utime(path, (mtime, mtime))


def make_run(tmp_path: Path, validation: dict, validation_mtime: float) -> tuple[Path, Path]:
    results, logs = tmp_path / "results/cpu", tmp_path / "logs/cpu"
    results.mkdir(parents=True)
    logs.mkdir(parents=True)
    write(results / "soak.json", {"status": "passed", "duration_s": 42.0,
                                  "run_summary": {"completed_iterations": 30, "total_env_steps": 240}}, 1000.0)
    write(results / "validation.json", validation, validation_mtime)
    return results, logs


def test_a_current_validation_passes_on_its_checks(tmp_path):
    results, logs = make_run(tmp_path, {"status": "passed", "checks": CHECKS, "passed": 2, "failed": 0}, 1001.0)
    outcome = run_outcome("cpu", results, logs)
    assert outcome.status == "passed" and (outcome.checks_passed, outcome.checks_total) == (2, 2)


def test_a_status_its_checks_contradict_is_failed(tmp_path):
    """Each check is judged again from its expected and actual values: neither the file's status nor
    a row's `passed` is read."""
    forged = {"status": "passed", "passed": 2, "failed": 0,
              "checks": [CHECKS[0], {"name": "leak verdict", "expected": False, "actual": True, "passed": True}]}
    results, logs = make_run(tmp_path, forged, 1001.0)
    outcome = run_outcome("cpu", results, logs)
    assert outcome.status == "failed" and outcome.reason == "failed checks: leak verdict"
    empty = tmp_path / "empty"
    results, logs = make_run(empty, {"status": "passed", "checks": [], "passed": 0, "failed": 0}, 1001.0)
    assert run_outcome("cpu", results, logs).reason == "validation.json holds no checks"


def test_a_validation_older_than_the_soak_is_stale(tmp_path):
    """The soak ran again after the last validation: that pass was of another soak."""
    results, logs = make_run(tmp_path, {"status": "passed", "checks": CHECKS, "passed": 2, "failed": 0}, 999.0)
    outcome = run_outcome("cpu", results, logs)
    assert outcome.status != "passed" and not outcome.has_validation
    assert run_lines("cpu", results, logs)[0].startswith("run cpu: NOT VALIDATED")
    (logs / "validate_artifacts.log").write_text("validate: error: the metrics JSON is unreadable\n")
    outcome = run_outcome("cpu", results, logs)
    assert (outcome.status, outcome.classification) == ("failed", "validation_failed")
    assert outcome.reason == "validate: error: the metrics JSON is unreadable"
