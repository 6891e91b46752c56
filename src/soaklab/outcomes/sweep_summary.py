"""`soaklab sweep-summary`: every run of a sweep in one table, passed or failed.

One row per run: its axis values, verdict and classification, throughput, reward and checks, read
from the run's own files (soaklab.outcomes.runs.run_outcome). Written as CSV (for pandas and spreadsheets),
an HTML page and a PNG of throughput per run coloured by verdict. A run that failed has its row, its
classification and the line that says why: the table is what a regression hunt reads first.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: the DAG and CI have no display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from soaklab.errors import InvalidInput  # noqa: E402
from soaklab.files.jsonfiles import loads_checked
from soaklab.files.report import write_table  # noqa: E402
from soaklab.outcomes.runs import RunOutcome, run_outcome  # noqa: E402

COLOURS = {"passed": "#1a7f37", "failed": "#cf222e", "not_run": "#8c959f"}


@dataclass(frozen=True)
class SweepPlan:
    sweep: str
    base: str
    runs: dict[str, dict[str, Any]]  # run -> axis -> value, in sweep order


def parse_plan(text: str) -> SweepPlan:
    """The plan the workflow passes (soaklab.dag.sweeps.Sweep.plan), checked: it names files to read."""
    raw = loads_checked(text, "--plan")
    if not (isinstance(raw, dict) and isinstance(raw.get("sweep"), str) and isinstance(raw.get("runs"), dict)
            and raw["runs"] and all(isinstance(v, dict) for v in raw["runs"].values())):
        raise InvalidInput("--plan: expected {\"sweep\": NAME, \"base\": RUN, \"runs\": {RUN: {AXIS: VALUE}}}")
    for run in raw["runs"]:
        # Run names become paths under results/ and logs/: a name with a separator is refused.
        if not isinstance(run, str) or not run or "/" in run or run in (".", "..") or "\0" in run:
            raise InvalidInput(f"--plan: run name {run!r} is not a plain name")
    return SweepPlan(raw["sweep"], str(raw.get("base")), raw["runs"])


def sweep_table(plan: SweepPlan, results: Path, logs: Path) -> pd.DataFrame:
    rows = []
    for run, axes in plan.runs.items():
        outcome: RunOutcome = run_outcome(run, results / run, logs / run)
        checks = (f"{outcome.checks_passed}/{outcome.checks_total}" if outcome.checks_total is not None else None)
        rows.append({
            "run": run,
            **{axis: json.dumps(v) if isinstance(v, dict | list) else v for axis, v in axes.items()},
            "status": outcome.status,
            "classification": outcome.classification,
            "env_steps_per_s": outcome.env_steps_per_s,
            "mean_reward": outcome.mean_reward,
            "checks": checks,
            "iterations": outcome.iterations,
            "soak_s": outcome.soak_seconds,
            "reason": outcome.reason,
        })
    table = pd.DataFrame(rows)
    table["iterations"] = table["iterations"].astype("Int64")  # whole numbers, blank where a run has none
    return table


def plot_sweep(table: pd.DataFrame, title: str, path: Path) -> None:
    """Throughput per run, one bar each, coloured by verdict; a run with no figure says why at zero."""
    height = max(2.5, 0.38 * len(table) + 1.2)
    fig, ax = plt.subplots(figsize=(11, height), dpi=110)
    fps = table["env_steps_per_s"].astype(float).fillna(0.0)
    ax.barh(table["run"], fps, color=[COLOURS.get(s, COLOURS["not_run"]) for s in table["status"]])
    top = float(fps.max()) if len(fps) else 0.0
    for y, (value, status, classification) in enumerate(zip(fps, table["status"], table["classification"],
                                                            strict=True)):
        label = f"{value:,.0f}" if status == "passed" else f"{status}: {classification}"
        if status != "passed" and value > 0:
            label = f"{value:,.0f}  {label}"
        ax.text(value + 0.01 * max(top, 1.0), y, label, va="center", fontsize=8,
                color="black" if status == "passed" else COLOURS.get(status, COLOURS["not_run"]))
    ax.invert_yaxis()  # sweep order, top to bottom
    ax.set_xlim(0, max(top * 1.35, 1.0))
    ax.set_xlabel("env-steps/s (Perf/total_fps, mean over the metric window)")
    passed = int((table["status"] == "passed").sum())
    ax.set_title(f"{title}: {passed} of {len(table)} runs passed")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def write_sweep_summary(plan: SweepPlan, results: Path, logs: Path, csv: Path, html: Path, plot: Path
                        ) -> pd.DataFrame:
    table = sweep_table(plan, results, logs)
    csv.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(csv, index=False)
    title = f"sweep {plan.sweep} (base run {plan.base})"
    plot_sweep(table, title, plot)
    rows = [{"passed": row["status"] == "passed", **row} for row in table.to_dict("records")]
    rows = [{k: (None if isinstance(v, float) and pd.isna(v) else v) for k, v in row.items()} for row in rows]
    passed = sum(row["passed"] for row in rows)
    figure = Path(os.path.relpath(Path(plot).resolve(), Path(html).resolve().parent)).as_posix()
    write_table(rows, html, title, f"{passed} of {len(rows)} runs passed", figure=figure)
    return table
