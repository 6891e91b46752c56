#!/usr/bin/env python3
"""What resumable checkpoints cost a finished run, read from its run dir (docs/runtime.md,
"Resuming a run").

- Bytes: the learner's and the collector's file of the last checkpoint (the run summary's
  `runtime_manifest.learner_diagnostics.resume`); the learner's serialisation and write time is measured there too.
- Seconds, as the run felt them: the collector writes its half inside the env step of iteration
  k - 1 and the learner its half after iteration k - 1, so a checkpoint at k lengthens the loop
  periods around it. The cost is the sum, over iterations k - 2 .. k + 2, of each period's excess
  over the median period of the run's steady state (iterations from --steady-from, the checkpoint
  windows left out). A period shorter than the median counts as negative: pipelined work that the
  checkpoint let catch up is not counted twice.

    .venv/bin/python benchmarks/visits/2026-12-05-h100-resume/checkpoint_cost.py RUN_DIR [RUN_DIR ...] --out cost.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from soaklab.bench.finished import RunFailed, completed_summary, report
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.host.info import git_state
from soaklab.metrics.events import current_tags, event_file, read_scalars
from soaklab.metrics.tags import ITERATION_TAG

WINDOW = 2  # iterations either side of k - 1 / k that a checkpoint can lengthen


def checkpoint_cost(run_dir: Path, steady_from: int) -> dict[str, Any]:
    summary = read_json(run_dir / "run_summary.json")
    run_config = read_json(run_dir / "run_config.json")
    algo = run_config["config"]["algo"]
    interval, total = int(algo["save_interval"]), int(algo["max_iterations"])
    resume = ((summary["runtime_manifest"].get("learner_diagnostics") or {}).get("resume")) or {}
    frame = current_tags(read_scalars(event_file(run_dir)))
    rows = frame[frame["tag"] == ITERATION_TAG].sort_values("step")
    period = dict(zip(rows["step"].astype(int), rows["value"].astype(float), strict=True))
    checkpoints = [k for k in range(interval, total, interval) if k - 1 in period and k + WINDOW in period]
    near = {i for k in checkpoints for i in range(k - 1 - WINDOW, k + WINDOW + 1)}
    steady = [v for i, v in period.items() if i >= steady_from and i not in near]
    if not steady:
        raise SystemExit(f"checkpoint_cost: {run_dir}: no iterations at or after {steady_from} outside "
                         "the checkpoint windows; lower --steady-from")
    median = statistics.median(steady)
    costs = [sum(period[i] - median for i in range(k - 1 - WINDOW, k + WINDOW + 1)) for k in checkpoints
             if k >= steady_from]
    return {
        "run_dir": str(run_dir),
        "num_envs": algo["num_envs"], "save_interval": interval, "max_iterations": total,
        # the ring's rows at the last checkpoint timed: one per env and iteration, up to its capacity
        "replay_rows_filled": None if not checkpoints else min(checkpoints[-1] * int(algo["num_envs"]),
                                                               int(algo["replay_buffer_size"])),
        "last_checkpoint_iteration": resume.get("last_iteration"),
        "median_iteration_ms": round(median, 3),
        "checkpoints_timed": len(costs),
        "seconds_per_checkpoint": {"median": round(statistics.median(costs) / 1e3, 3) if costs else None,
                                   "each": [round(c / 1e3, 3) for c in costs]},
        "learner_seconds_last": resume.get("last_learner_seconds"),
        "bytes_last": {"learner": resume.get("last_learner_bytes"), "collector": resume.get("last_collector_bytes")},
        "checkpoints_written": resume.get("checkpoints_written"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steady-from", type=int, default=500, help="first iteration of the steady state")
    parser.add_argument("--source", default="", help="what produced the run dirs (recorded in the JSON)")
    args = parser.parse_args()
    for run_dir in args.run_dirs:
        try:
            completed_summary(run_dir)
        except RunFailed as exc:
            return report("checkpoint_cost", exc)
    runs = [checkpoint_cost(d, args.steady_from) for d in args.run_dirs]
    write_json_atomic(args.out, {"command": " ".join(sys.argv), "source": args.source, "git": git_state(),
                                 "runs": runs})
    for run in runs:
        print(f"{run['run_dir']}: {run['num_envs']} envs, {run['checkpoints_timed']} checkpoints timed, "
              f"{run['seconds_per_checkpoint']['median']} s each (median), learner file "
              f"{run['bytes_last']['learner']} B, collector file {run['bytes_last']['collector']} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
