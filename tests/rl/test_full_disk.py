"""A run dir on a full disk (a small tmpfs): the trainer fails closed, in one line, leaving no
partial files, processes or segments. Needs root to mount; skips cleanly without it."""

from __future__ import annotations

from soaklab.files.rundir import LOCK as RUN_DIR_LOCK
from tests.rl.conftest import own_segments, process_gone


def test_a_full_disk_fails_closed_with_nothing_partial_left(start_train, tmpfs):
    run_dir = tmpfs("384k") / "run"
    run = start_train("algo.max_iterations=100000", "algo.save_interval=5", run_dir=run_dir)
    code = run.wait(timeout=300)
    out = run.output()
    assert code == 1, out
    errors = [line for line in out.splitlines() if line.startswith("train: error:")]
    assert errors and all("Traceback" not in line for line in errors)
    assert any("No space left on device" in line for line in errors), out
    assert "Traceback" not in out, out
    leftovers = [p.name for p in run_dir.rglob("*")
                 if p.name.endswith(".tmp") or (p.name.startswith(".") and p.name != RUN_DIR_LOCK)]
    assert leftovers == [], f"partial files: {leftovers}"
    assert own_segments([run.proc.pid]) == []
    assert process_gone(run.proc.pid)
