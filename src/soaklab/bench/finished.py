"""A run a benchmark reads, checked before its files are: a run that did not complete (failed,
diverged, cancelled, or gone before its summary) is reported with its cause, and the benchmark exits 1
instead of reading on into a traceback (docs/learning.md, "Benchmarks of a run")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import JSONRefused, read_json


class RunFailed(Exception):
    """The run dir holds no completed run; the message says why, in one line."""


class SummaryRefused(RunFailed, InvalidInput):
    """The run's run_summary.json refused as JSON (a key twice, too deep, too large, not JSON): bad
    input, so the benchmark exits 2, not 1."""


def completed_summary(run_dir: Path) -> dict[str, Any]:
    """The run's run_summary.json, when it says `completed`; else RunFailed naming the cause: the
    summary's failure reason (classification, exception), or that there is none to read."""
    path = run_dir / "run_summary.json"
    if not path.is_file():
        raise RunFailed(f"{run_dir}: no run_summary.json; the trainer ended before writing its summary "
                        "(see its console log)")
    try:
        summary = read_json(path)
    except JSONRefused as exc:  # a key twice, too deep, too large: bad input, never read on
        raise SummaryRefused(str(exc)) from None
    except OSError as exc:
        raise RunFailed(f"{path}: unreadable ({exc})") from None
    if not isinstance(summary, dict):
        raise RunFailed(f"{path}: not a run summary (a JSON object)")
    if summary.get("status") != "completed":
        reason = summary.get("failure_reason") or "no failure reason recorded"
        raise RunFailed(f"{run_dir}: the run {summary.get('status')} at iteration "
                        f"{summary.get('completed_iterations')}: {reason}")
    return summary


def report(prog: str, exc: Exception, log: Path | None = None) -> int:
    """Print the failure (and where the trainer's output went) on stderr; the benchmark's exit code:
    2 for a refused input, 1 for a run that failed."""
    print(f"{prog}: {exc}{f'; the trainer output is in {log}' if log is not None else ''}", file=sys.stderr)
    return SummaryRefused.exit_code if isinstance(exc, SummaryRefused) else 1
