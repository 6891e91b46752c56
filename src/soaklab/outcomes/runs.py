"""What a DAG run produced: each run's outcome, read from its files alone.

`soaklab summary` prints it in a few lines a person reads at the end of `make soak`: the verdict
(validation, or the soak's own classification when the DAG failed before validation), headline
figures, where the results lie, how to open the report and TensorBoard. `soaklab sweep-summary`
puts the same outcomes in one table (soaklab.outcomes.sweep_summary). Nothing here fails on a missing file:
a missing file is part of the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soaklab.files.jsonfiles import read_json
from soaklab.soak.criteria import row_passed

# The branch of one run, in DAG order: the log each rule writes, and the classification of a run that
# stopped there without leaving its soak evidence (the soak's own classification wins where it exists).
BRANCH = (
    ("resolve_config", "config_rejected"),
    ("mps_start", "mps_failed"),
    ("train_soak", "soak_failed"),
    ("extract_metrics", "metrics_failed"),
    ("validate_artifacts", "validation_failed"),
)


DERIVED_BY = ("extract_metrics", "validate_artifacts")  # the rules that read the soak's results


def _read(path: Path) -> dict[str, Any] | None:
    try:
        value = read_json(path)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _last_line(path: Path) -> str | None:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return None
    return lines[-1] if lines else None


def _mean(metrics: dict[str, Any] | None, tag: str) -> float | None:
    entry = ((metrics or {}).get("metrics") or {}).get(tag)
    return entry.get("mean") if isinstance(entry, dict) else None


@dataclass(frozen=True)
class RunOutcome:
    run: str
    status: str  # passed | failed | not_run
    classification: str  # clean_exit for a pass; the failure's class otherwise
    reason: str | None
    checks_passed: int | None
    checks_total: int | None
    soak_seconds: float | None
    iterations: int | None
    env_steps: int | None
    env_steps_per_s: float | None  # Perf/total_fps over the metric window
    mean_reward: float | None
    metrics_window: int | None
    has_validation: bool
    has_evidence: bool


def _stopped_at(run: str, logs: Path, results: Path) -> tuple[str, str | None] | None:
    """The first rule of the branch whose log exists and whose output does not: where the run stopped."""
    outputs = {"resolve_config": "run_config.json", "mps_start": "mps.json", "train_soak": "soak.json",
               "extract_metrics": "metrics.json", "validate_artifacts": "validation.json"}
    for rule, classification in BRANCH:
        log = logs / f"{rule}.log"
        output = results / outputs[rule]
        done = _derived(output, results / "soak.json") is not None if rule in DERIVED_BY else output.is_file()
        if log.is_file() and not done:
            return classification, _last_line(log)
    return None


def _derived(path: Path, soak: Path) -> dict[str, Any] | None:
    """A result derived from the run's soak, if it was derived from the soak that stands: a soak that
    ran again (and failed: Snakemake removed its soak.json) leaves earlier results stale."""
    try:
        current = path.stat().st_mtime >= soak.stat().st_mtime
    except OSError:
        return None
    return _read(path) if current else None


def run_outcome(run: str, results: Path, logs: Path) -> RunOutcome:
    """The outcome of one run of the workflow (results/{run}, logs/{run})."""
    validation = _derived(results / "validation.json", results / "soak.json")
    evidence = _read(logs / "soak_evidence" / "soak.json")
    soak = _read(results / "soak.json") or evidence
    metrics = _derived(results / "metrics.json", results / "soak.json")
    summary = (soak or {}).get("run_summary") or {}
    checks_passed = checks_total = None
    reason = None
    if validation is not None:
        # recomputed from the checks, not read from the status field
        checks = [c for c in validation.get("checks") or [] if isinstance(c, dict)]
        failed = [str(c.get("name")) for c in checks if not row_passed(c)]
        checks_passed, checks_total = len(checks) - len(failed), len(checks)
        status = "passed" if checks and not failed else "failed"
        classification = "clean_exit" if status == "passed" else "validation_failed"
        reason = None if status == "passed" else ("failed checks: " + ", ".join(failed) if failed
                                                  else "validation.json holds no checks")
    elif soak is not None and soak.get("status") != "passed":
        status, classification = "failed", str(soak.get("failure_classification"))
        reason = soak.get("failure_reason")
    else:
        stopped = _stopped_at(run, logs, results)
        if stopped is not None:
            status, (classification, reason) = "failed", stopped
        else:
            status, classification = "not_run", "not_run"
            reason = "no soak JSON, no validation"
    return RunOutcome(
        run=run, status=status, classification=classification, reason=reason,
        checks_passed=checks_passed, checks_total=checks_total,
        soak_seconds=soak.get("duration_s") if soak else None,
        iterations=summary.get("completed_iterations"), env_steps=summary.get("total_env_steps"),
        env_steps_per_s=_mean(metrics, "Perf/total_fps"), mean_reward=_mean(metrics, "Train/mean_reward"),
        metrics_window=(metrics or {}).get("last"),
        has_validation=validation is not None, has_evidence=evidence is not None and validation is None,
    )


def _verdict(outcome: RunOutcome) -> str:
    if outcome.has_validation:
        return f"{outcome.status.upper()} ({outcome.checks_passed}/{outcome.checks_total} checks)"
    if outcome.status == "failed":
        return f"FAILED ({outcome.classification}): {outcome.reason}"
    if outcome.soak_seconds is not None:
        return "NOT VALIDATED (the soak passed; its validation is missing or older than the soak)"
    return "not run (no soak JSON, no validation)"


def run_lines(run: str, results: Path, logs: Path) -> list[str]:
    """The lines for one run of the workflow (results/{run}, logs/{run})."""
    outcome = run_outcome(run, results, logs)
    lines = [f"run {run}: {_verdict(outcome)}"]
    if outcome.soak_seconds is not None:
        figures = [f"soak {outcome.soak_seconds:.0f} s"]
        if outcome.iterations is not None:
            figures.append(f"{outcome.iterations:,} iterations, {outcome.env_steps or 0:,} env steps")
        if outcome.env_steps_per_s is not None:
            figures.append(f"{outcome.env_steps_per_s:,.0f} env-steps/s (last {outcome.metrics_window} windows)")
        if outcome.mean_reward is not None:
            figures.append(f"mean reward {outcome.mean_reward:.3g}")
        lines.append("  " + ", ".join(figures))
    if outcome.has_validation:
        lines += [f"  checks:      {results / 'validation.html'}",
                  f"  curves:      {results / 'metrics.png'} (table: {results / 'metrics.html'})",
                  f"  TensorBoard: tensorboard --logdir {results / 'train'}"]
    elif outcome.has_evidence:
        lines.append(f"  evidence:    {logs / 'soak_evidence'}/ (soak.json, soak-console.log, run_summary.json)")
    elif outcome.status == "failed":
        lines.append(f"  log:         {logs}/")
    return lines


def summary_lines(runs: list[str], results_root: Path = Path("results"), logs_root: Path = Path("logs"),
                  target: str = "soak") -> list[str]:
    lines: list[str] = []
    for run in runs:
        lines += run_lines(run, results_root / run, logs_root / run)
    lines.append(f"report: snakemake {target} --cores 1 --report report.html (plots, metrics and checks of every run)")
    return lines
