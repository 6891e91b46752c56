"""`soaklab metrics` and `soaklab validate`: what a soak's files say, and the pass table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def cmd_metrics(args: argparse.Namespace) -> int:
    from soaklab.metrics.extract import extract_metrics

    metrics = extract_metrics(args.run_dir, args.last, args.out, args.csv, args.plot, args.html,
                              args.legacy_unversioned)
    print(f"metrics: last {args.last} windows of {args.run_dir} -> {args.out}")
    shown = {k: v for k, v in metrics["tracking"].items() if v is not None}
    if shown:
        print("metrics: tracking " + ", ".join(f"{k}={v:.3g}" for k, v in shown.items()))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from soaklab.outcomes.validation import validate_soak

    report = validate_soak(args.soak, args.run_dir, args.metrics, args.run_config, args.out, args.html)
    bad = [c for c in report["checks"] if not c["passed"]]
    for check in bad:
        print(f"validate: FAILED {check['name']}: expected {check['expected']!r}, got {check['actual']!r}",
              file=sys.stderr)
    print(f"validate: {len(report['checks']) - len(bad)}/{len(report['checks'])} checks passed; {args.out}")
    return 1 if bad else 0


def add_evidence_commands(sub: Any) -> None:
    """Metrics and validate: a run's evidence read back and checked."""
    metrics = sub.add_parser("metrics", help="last-N metric windows, CSV and plot from a run's event file")
    metrics.add_argument("run_dir", type=Path, help="the run dir holding one event file and run_summary.json")
    metrics.add_argument("--last", type=int, default=20, help="windows (logged iterations) to average")
    metrics.add_argument("--out", type=Path, required=True, help="metrics JSON")
    metrics.add_argument("--csv", type=Path, help="every scalar as CSV")
    metrics.add_argument("--plot", type=Path, help="PNG of throughput, reward and losses")
    metrics.add_argument("--html", type=Path, help="the metrics as an HTML table (for the Snakemake report)")
    metrics.add_argument("--legacy-unversioned", action="store_true",
                         help="read a run without metric_schema_version (lower-case perf/*, timing/* tags)")
    metrics.set_defaults(func=cmd_metrics)

    validate = sub.add_parser("validate", help="check every artifact against its schema and the pass table")
    validate.add_argument("--soak", type=Path, required=True, help="the soak JSON")
    validate.add_argument("--run-dir", type=Path, required=True, help="the trainer's run dir")
    validate.add_argument("--metrics", type=Path, help="the metrics JSON of `soaklab metrics`")
    validate.add_argument("--run-config", type=Path, help="the resolved run config (the run dir's when not given)")
    validate.add_argument("--out", type=Path, required=True, help="the validation JSON")
    validate.add_argument("--html", type=Path, help="the checks as an HTML table (for the Snakemake report)")
    validate.set_defaults(func=cmd_validate)
