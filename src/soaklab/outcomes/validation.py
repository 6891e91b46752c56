"""`soaklab validate`: every artifact of a soak against its schema and the pass table (docs/soak.md).

An artifact that is missing, unreadable or breaks its schema is bad input (exit 2, no report):
schema conformance is a precondition, never a check that can only read "valid". Otherwise every
check is written with its expected and actual value, and any failed check makes the command exit 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soaklab.config.run_config import config_hash, recorded_run
from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.metrics.events import PER_ITERATION, read_events
from soaklab.metrics.extract import REQUIRED_TAGS
from soaklab.metrics.tags import METRIC_SCHEMA_VERSION
from soaklab.schemas import load_artifact, validate_artifact
from soaklab.soak.criteria import Check, monitor_checks, rank_checks, run_summary_checks

VALIDATION_SCHEMA_VERSION = 1
# The required series logged at every iteration: one absent altogether misses every row.
PER_ITERATION_REQUIRED = frozenset(t for t in REQUIRED_TAGS if t.startswith(PER_ITERATION))


def _load(name: str, path: Path) -> Any:
    if not path.is_file():
        raise InvalidInput(f"{path}: missing {name}")
    return load_artifact(name, path, f"it is not a valid {name}")


def consistency_checks(soak: dict[str, Any], summary: dict[str, Any], run_config: dict[str, Any],
                       run_dir: Path) -> list[Check]:
    """The artifacts must describe one and the same run."""
    return [
        Check("soak JSON embeds this run dir's run_summary.json", True, soak["run_summary"] == summary),
        Check("config hash: recomputed from run_config.json's config", run_config["config_hash"],
              config_hash(run_config["config"])),
        Check("config hash: run_summary.json = run_config.json", run_config["config_hash"], summary["config_hash"]),
        Check("config hash: soak context = run_config.json", run_config["config_hash"],
              soak["context"]["config_hash"]),
        Check("checkpoints written", True, any((run_dir / "checkpoints").glob("*.pt"))),
    ]


def undeclared_gaps(run_dir: Path, event_file: str, summary: dict[str, Any]) -> list[str]:
    """Per-iteration rows missing from the run's event file that run_summary.json does not declare
    (a resume that could not carry damaged records declares them: docs/runtime.md, "Resuming a run").

    Every iteration the run completed, 0..completed_iterations-1 (run_summary.json), must have its row
    in each Perf/ series: a series judged only between its own first and last row would pass a file
    whose first or last rows are gone (cut at the end, or a head lost)."""
    path = run_dir / Path(event_file).name
    if not path.is_file():  # "read this run dir's own event file" fails instead
        return []
    frame, _ = read_events(path)
    covered = {s for gap in summary.get("event_gaps") or []
               for s in range(int(gap["steps"][0]), int(gap["steps"][1]) + 1)}
    expected = range(int(summary["completed_iterations"]))
    rows = {str(tag): set(steps.tolist()) for tag, steps in frame.groupby("tag")["step"]}
    lines = []
    for tag in sorted({t for t in rows if t.startswith(PER_ITERATION)} | PER_ITERATION_REQUIRED):
        have = rows.get(tag, set())
        missing = [s for s in expected if s not in have and s not in covered]
        if missing:
            lines.append(f"{tag}: {len(missing)} steps missing ({missing[0]}..{missing[-1]}), no gap declared")
    return lines


def event_file_checks(run_dir: Path, summary: dict[str, Any]) -> list[Check]:
    """Without --metrics: the same required-rows row, read from the run dir's own event file, so that a
    truncated or cut file never passes for want of a metrics JSON."""
    files = sorted(p.name for p in run_dir.glob("events.out.tfevents.*"))
    found = undeclared_gaps(run_dir, files[0], summary) if len(files) == 1 else [
        f"{len(files)} event files in {run_dir} ({', '.join(files) or 'none'}); a run writes one"]
    return [Check("metrics: missing required tags", [], found)]


def metrics_checks(metrics: dict[str, Any], run_dir: Path, run_config: dict[str, Any],
                   summary: dict[str, Any]) -> list[Check]:
    identity = metrics.get("run_identity") or {}
    return [
        Check("metrics: the event file names this run's config hash", run_config["config_hash"],
              identity.get("config_hash")),
        # Full resolved paths: every DAG run dir is called `train`, so a name would match any run.
        Check("metrics read this run dir", str(run_dir.resolve()), str(Path(metrics["run_dir"]).resolve())),
        Check("metrics: read this run dir's own event file",
              sorted(p.name for p in run_dir.glob("events.out.tfevents.*")), [metrics["event_file"]]),
        Check("metrics: metric_schema_version", METRIC_SCHEMA_VERSION, metrics["metric_schema_version"]),
        # A required series with rows missing, undeclared, is as good as missing. One row with the tags
        # (not a row of its own), so the records' validation rows stay as they were.
        Check("metrics: missing required tags", [], [t for t in metrics["missing"] if t in REQUIRED_TAGS]
              + undeclared_gaps(run_dir, metrics["event_file"], summary)),
        Check("metrics: non-finite windows", [], metrics["non_finite"]),
    ]


def validate_soak(soak_path: Path, run_dir: Path, metrics_path: Path | None, run_config_path: Path | None,
                  out: Path, html: Path | None = None) -> dict[str, Any]:
    if not run_dir.is_dir():
        raise InvalidInput(f"--run-dir {run_dir}: not a directory")
    soak = _load("soak", soak_path)
    summary = _load("run_summary", run_dir / "run_summary.json")
    run_config = _load("run_config", run_config_path or run_dir / "run_config.json")
    metrics = _load("metrics", metrics_path) if metrics_path is not None else None
    artifacts = {"soak": str(soak_path), "run_summary": str(run_dir / "run_summary.json"),
                 "run_config": str(run_config_path or run_dir / "run_config.json"),
                 "metrics": str(metrics_path) if metrics_path else None}
    checks = monitor_checks(soak)
    run = recorded_run(run_config_path or run_dir / "run_config.json", run_config)
    checks += run_summary_checks(summary, run.algo.num_envs)
    checks += rank_checks(summary, run_config)
    checks += consistency_checks(soak, summary, run_config, run_dir)
    checks += (metrics_checks(metrics, run_dir, run_config, summary) if metrics is not None
               else event_file_checks(run_dir, summary))
    passed = sum(c.passed for c in checks)
    report = {"schema_version": VALIDATION_SCHEMA_VERSION, "status": "passed" if passed == len(checks) else "failed",
              "artifacts": artifacts, "passed": passed, "failed": len(checks) - passed,
              "checks": [c.record() for c in checks]}
    validate_artifact("validation", report)
    if html is not None:
        from soaklab.files.report import write_table

        write_table(report["checks"], html, f"validation of {soak_path}",
                    f"{report['status']}: {passed} of {len(checks)} checks passed")
    write_json_atomic(out, report)
    return report
