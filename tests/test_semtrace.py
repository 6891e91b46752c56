"""scripts/gpu/semtrace: a real process with the tracer on its path registers two semaphores, frees
one and exits without multiprocessing's finalizers; the tracker warns, and leaks.py names the other
with the line that made it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

TRACER = REPO / "scripts" / "gpu" / "semtrace"

PROGRAM = """\
import gc, multiprocessing as mp, os
ctx = mp.get_context("spawn")  # as the trainer's: named semaphores the resource tracker follows
kept = ctx.Semaphore(0)
freed = ctx.Semaphore(0)
del freed
gc.collect()
os._exit(0)  # no finalizers: `kept` stays registered
"""


def test_leaks_names_the_semaphore_never_unregistered_and_its_stack(tmp_path: Path) -> None:
    program = tmp_path / "leaky.py"
    program.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TRACER), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("semtrace register") == 2 and run.stderr.count("semtrace unregister") == 1
    assert "There appear to be 1 leaked semaphore objects" in run.stderr  # the warning being traced
    log = tmp_path / "run.log"
    log.write_text(run.stderr)
    report = subprocess.run([sys.executable, str(TRACER / "leaks.py"), str(log)], capture_output=True, text=True,
                            timeout=60)
    assert report.returncode == 1
    assert "1 semaphore(s) registered and never unregistered" in report.stdout
    assert "kept = ctx.Semaphore(0)" in report.stdout and "freed = ctx.Semaphore(0)" not in report.stdout
