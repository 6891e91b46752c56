"""`soaklab metrics`, `soaklab validate` and `soaklab diff-runs`: what a soak's files say, the pass table,
and whether two runs are the same bit for bit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput


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


def cmd_diff_runs(args: argparse.Namespace) -> int:
    """Two run dirs: their traces (where both have one) to the first step, stage and tensor that
    differ; then their Train/ and Loss/ series and final weights (where both finished)."""
    from soaklab.metrics import same_run, trace

    a, b = args.run_a, args.run_b
    for run in (a, b):
        if not run.is_dir():
            raise InvalidInput(f"{run}: not a run dir")
    if a.resolve() == b.resolve():
        raise InvalidInput(f"{b}: is {a} again; give two different run dirs")
    configs = same_run.config_difference(a, b)  # said first: a difference that follows is the edit's
    if configs is not None:
        print(f"diff-runs: configs differ: {configs} (the first such key); a difference below follows from "
              "the configs, not from nondeterminism")
    traced = [(run / trace.TRACE_DIR).is_dir() for run in (a, b)]
    if any(traced):
        ta, tb = trace.read_trace(a), trace.read_trace(b)  # one without a trace is refused, naming it
        found = trace.first_difference(ta, tb)
        if found is not None and (ends := trace.ends_line(ta, tb, found, (str(a), str(b)))) is not None:
            print(f"diff-runs: {ends}")
            return 1
        if found is not None:
            print(f"diff-runs: {found.line((str(a), str(b)))}")
            values = trace.values_line(a, b, found)
            if values is not None:
                print(values)
            elif configs is None:  # the values are worth a rerun only where nothing else explains them
                print(f"  rerun both with SOAKLAB_TRACE=1 SOAKLAB_TRACE_DUMP={found.step} to compare the values")
            return 1
        print(f"diff-runs: traces equal: {len({s for s, _ in tb})} steps, "
              f"{sum(len(d) for d in tb.values())} tensor digests")
    finished = [(run / "checkpoints" / "model_final.pt").is_file() for run in (a, b)]
    if not all(finished):
        if not any(traced):
            raise InvalidInput(f"{a if not finished[0] else b}: no final checkpoint and no trace to compare")
        print("diff-runs: series and weights not compared (a run without a final checkpoint)")
        return 0
    difference = same_run.first_difference(a, b)
    print(f"diff-runs: {difference}" if difference else "diff-runs: Train/ and Loss/ series and final weights equal")
    return 1 if difference else 0


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

    diff = sub.add_parser("diff-runs", help="whether two runs are the same bit for bit, and if not, the first "
                                            "step and tensor that differ (docs/determinism.md)")
    diff.add_argument("run_a", type=Path, help="a run dir (traced with SOAKLAB_TRACE=1, or finished)")
    diff.add_argument("run_b", type=Path, help="the run dir to compare it with")
    diff.set_defaults(func=cmd_diff_runs)
