"""`soaklab summary`, `sweep-summary` and `wandb summary`: what DAG runs produced."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def cmd_summary(args: argparse.Namespace) -> int:
    from soaklab.outcomes.runs import summary_lines

    print("\n".join(summary_lines(args.runs, args.results, args.logs, args.target)))
    return 0


def cmd_wandb_summary(args: argparse.Namespace) -> int:
    from soaklab.outcomes.wandb_summary import write_summary

    run = args.run or args.run_dir.name
    record = write_summary(args.run_dir, run, args.results, args.logs, args.evaluation, args.artifact, args.out,
                           args.html)
    state = "written" if record["state"] == "ok" else f"not written: {record['reason']}"
    print(f"wandb: {run}: summary ({len(record['summary'])} values) and {len(record['artifacts'])} files {state}; "
          f"upload with `{record['sync']}`; {args.out}")
    return 0


def cmd_sweep_summary(args: argparse.Namespace) -> int:
    from soaklab.outcomes.sweep_summary import parse_plan, write_sweep_summary

    plan = parse_plan(args.plan)
    table = write_sweep_summary(plan, args.results, args.logs, args.csv, args.html, args.plot)
    counts = table["status"].value_counts().to_dict()
    print(f"sweep {plan.sweep}: {len(table)} runs, " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
          + f"; table {args.csv} ({args.html}, plot {args.plot})")
    for row in table[table["status"] != "passed"].itertuples():
        print(f"  {row.run}: {row.status} ({row.classification}): {row.reason}")
    return 0


def add_outcome_commands(sub: Any) -> None:
    """Summary and sweep-summary: what a DAG run produced."""
    summary = sub.add_parser("summary", help="each run's verdict, figures and where its results lie (end of a DAG run)")
    summary.add_argument("runs", nargs="+", metavar="RUN", help="run names of the workflow config")
    summary.add_argument("--results", type=Path, default=Path("results"), help="the DAG's results folder")
    summary.add_argument("--logs", type=Path, default=Path("logs"), help="the DAG's logs folder")
    summary.add_argument("--target", default="soak", choices=("soak", "sweep", "reproduce"),
                         help="the target the report line names")
    summary.set_defaults(func=cmd_summary)

    wandb = sub.add_parser("wandb", help="a run's W&B run (training.loggers with wandb)").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    wandb_summary = wandb.add_parser("summary", help="add the DAG's verdict, evaluation and files to the run's W&B run")
    wandb_summary.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the training run dir")
    wandb_summary.add_argument("--run", help="the workflow run's name (default: the run dir's)")
    wandb_summary.add_argument("--results", type=Path,
                               help="the DAG's results/{run}: its soak verdict, metrics and validation")
    wandb_summary.add_argument("--logs", type=Path, help="the DAG's logs/{run} (with --results)")
    wandb_summary.add_argument("--evaluation", type=Path, action="append", default=[],
                               help="an evaluation JSON (soaklab evaluate); repeatable")
    wandb_summary.add_argument("--artifact", type=Path, action="append", default=[],
                               help="a file to log as a W&B artifact (the ONNX policy, the play video); repeatable")
    wandb_summary.add_argument("--out", type=Path, required=True, help="the record: folders, sync command, state")
    wandb_summary.add_argument("--html", type=Path, help="the same as a page (for the Snakemake report)")
    wandb_summary.set_defaults(func=cmd_wandb_summary)

    sweep = sub.add_parser("sweep-summary", help="every run of a sweep in one table: CSV, HTML and a throughput plot")
    sweep.add_argument("--plan", required=True,
                       help="the sweep's runs and their axis values as JSON (the DAG passes it)")
    sweep.add_argument("--results", type=Path, default=Path("results"), help="the DAG's results folder")
    sweep.add_argument("--logs", type=Path, default=Path("logs"), help="the DAG's logs folder")
    sweep.add_argument("--csv", type=Path, required=True, help="the table as CSV")
    sweep.add_argument("--html", type=Path, required=True, help="the table as an HTML page (with the plot)")
    sweep.add_argument("--plot", type=Path, required=True, help="throughput per run, coloured by verdict (PNG)")
    sweep.set_defaults(func=cmd_sweep_summary)
