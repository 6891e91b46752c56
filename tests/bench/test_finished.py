"""A benchmark given a failed run reports its cause in one line and exits 1, never a traceback
(soaklab.bench.finished), on a real run that failed at its first iteration; one given a run summary
soaklab never wrote refuses it in one line and exits 2. scripts/gpu/gpu_phases.py, a driver that
reads a run through it, is run as a file as the GPU scripts run it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from soaklab.bench.finished import RunFailed, completed_summary
from tests.conftest import REPO, one_line


def phases(run_dir: object, out: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "gpu" / "gpu_phases.py"), str(run_dir),
                           "--out", str(out)], capture_output=True, text=True, timeout=120)


def test_a_failed_run_is_reported_with_its_cause(start_train, tmp_path):
    run = start_train("algo.max_iterations=20", fault="raise_learner@0")
    assert run.wait() == 1, run.output()
    with pytest.raises(RunFailed, match="the run failed at iteration 0: learner_failure: RuntimeError: "
                                        "injected learner fault at iteration 0"):
        completed_summary(run.run_dir)
    done = phases(run.run_dir, tmp_path / "phases.json")
    assert done.returncode == 1, done.stderr
    assert "injected learner fault at iteration 0" in one_line(done.stderr)
    assert not (tmp_path / "phases.json").exists()


# A run_summary.json soaklab never wrote: a key twice (a parser keeps the later "completed"), and one
# nested past MAX_JSON_DEPTH (json's recursion would end in a traceback).
DUPLICATE = '{"status": "failed", "completed_iterations": 3, "status": "completed"}'
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("text", "named"), [(DUPLICATE, "key 'status' appears twice"),
                                             (DEEP, "nested deeper than 64 levels")])
def test_a_summary_soaklab_never_wrote_is_refused_in_one_line(tmp_path, text, named):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run_summary.json").write_text(text)
    with pytest.raises(RunFailed, match=named):
        completed_summary(run_dir)
    done = phases(run_dir, tmp_path / "phases.json")
    assert done.returncode == 2, done.stderr
    line = one_line(done.stderr)
    assert line.startswith(f"gpu_phases: {run_dir / 'run_summary.json'}: ") and named in line
    assert not (tmp_path / "phases.json").exists()
