"""`soaklab summary`: what a DAG run produced, in a few lines a person reads at the end of `make soak`.

For each run: the verdict (validation, or the soak's own classification when the DAG failed before
validation), headline figures, where the results lie, and how to open the report and TensorBoard.
It reads only the run's files and never fails on a missing one: it says what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _read(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _mean(metrics: dict[str, Any] | None, tag: str) -> float | None:
    entry = ((metrics or {}).get("metrics") or {}).get(tag)
    return entry.get("mean") if isinstance(entry, dict) else None


def run_lines(run: str, results: Path, logs: Path) -> list[str]:
    """The lines for one run of the workflow (results/{run}, logs/{run})."""
    validation = _read(results / "validation.json")
    soak = _read(results / "soak.json") or _read(logs / "soak_evidence" / "soak.json")
    metrics = _read(results / "metrics.json")
    if validation is not None:
        total = validation.get("passed", 0) + validation.get("failed", 0)
        verdict = f"{str(validation.get('status')).upper()} ({validation.get('passed')}/{total} checks)"
    elif soak is not None:
        verdict = f"FAILED ({soak.get('failure_classification')}): {soak.get('failure_reason')}"
    else:
        verdict = "not run (no soak JSON, no validation)"
    lines = [f"run {run}: {verdict}"]
    if soak is not None:
        summary = soak.get("run_summary") or {}
        figures = [f"soak {soak.get('duration_s', 0):.0f} s"]
        if summary.get("completed_iterations") is not None:
            figures.append(f"{summary['completed_iterations']:,} iterations, {summary.get('total_env_steps', 0):,} "
                           "env steps")
        fps = _mean(metrics, "Perf/total_fps")
        if fps is not None:
            figures.append(f"{fps:,.0f} env-steps/s (last {metrics.get('last')} windows)")
        reward = _mean(metrics, "Train/mean_reward")
        if reward is not None:
            figures.append(f"mean reward {reward:.3g}")
        lines.append("  " + ", ".join(figures))
    if validation is not None:
        lines += [f"  checks:      {results / 'validation.html'}",
                  f"  curves:      {results / 'metrics.png'} (table: {results / 'metrics.html'})",
                  f"  TensorBoard: tensorboard --logdir {results / 'train'}"]
    elif soak is not None:
        lines.append(f"  evidence:    {logs / 'soak_evidence'}/ (soak.json, soak-console.log, run_summary.json)")
    return lines


def summary_lines(runs: list[str], results_root: Path = Path("results"), logs_root: Path = Path("logs")) -> list[str]:
    lines: list[str] = []
    for run in runs:
        lines += run_lines(run, results_root / run, logs_root / run)
    lines.append("report: snakemake soak --cores 1 --report report.html (plots, metrics and checks of every run)")
    return lines
