#!/usr/bin/env python3
"""Issue 49's figures of this visit in one JSON: the records (median over seeds), the env step alone
against both ceilings, the in-run env step against alone, and the library's rate.

    python benchmarks/visits/2026-12-06-records/summarise.py   # writes summary.json beside this file
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDS = HERE.parents[2] / "records"
MACHINE = "gpu-nvidia-h100-80gb-hbm3-x1"
GOALS = {1024: 150_000, 4096: 400_000}


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def record_medians(name: str) -> dict[str, float]:
    runs = sorted((RECORDS / name / "machines" / MACHINE / "runs").iterdir())
    figures = [read(run / "snapshot.json")["figures"] for run in runs]
    return {key: statistics.median(f[key] for f in figures) for key in figures[0]}


def main() -> None:
    raw = {run["worlds"]: run for run in read(HERE / "ceiling.json")["runs"]}
    sizes = {}
    for n, record in ((1024, "gpu-soak-1024"), (4096, "gpu-throughput-4096")):
        alone = read(HERE / f"backend_{n}.json")["results"][0]
        run = record_medians(record)
        sizes[n] = {
            "record": record, "run": run, "goal_env_steps_per_s": GOALS[n],
            "run_over_goal": run["env_steps_per_s"] / GOALS[n],
            "env_alone_env_steps_per_s": alone["throughput_env_control_steps_per_s"],
            "env_alone_phases_ms": alone["phases"],
            "raw_ceiling_env_steps_per_s": raw[n]["env_steps_per_s"],
            "ceiling_from_env_states_env_steps_per_s": alone["raw_physics_ceiling_env_steps_per_s"],
            "free_running_ceiling_env_steps_per_s": alone["raw"]["free_running_env_steps_per_s"],
            "env_alone_over_raw_ceiling": alone["throughput_env_control_steps_per_s"] / raw[n]["env_steps_per_s"],
            "env_alone_over_ceiling_from_env_states": alone["env_over_ceiling"],
            "run_over_raw_ceiling": run["env_steps_per_s"] / raw[n]["env_steps_per_s"],
            "in_run_env_step_over_alone": run["collector_env_step_ms"] / alone["phases"]["iteration_ms"],
        }
    library = read(HERE / "library_step_1024.json")
    summary = {
        "command": "python benchmarks/visits/2026-12-06-records/summarise.py",
        "device": read(HERE / "ceiling.json")["device"],
        "sizes": sizes,
        "library_1024": {"library_over_one_clip": library["library_over_one_clip"],
                         "step_ms": {k: v["step_ms_median"] for k, v in library["results"].items()},
                         "library_over_blocks_alone": library["library_over_blocks_alone"]},
    }
    (HERE / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
