#!/usr/bin/env python3
"""Throughput and phase breakdown of a finished GPU soak, from its TensorBoard event file.

The soak itself runs on the GPU machine (the README's GPU block, through
`scripts/gpu/readme_block.sh`); this reads the run dir there and writes
JSON: steady-state throughput against the target, and per-iteration medians of
each phase (learner inference, ingress and update are GPU time between CUDA
events; the collector's env step is GPU time too, but is published every
`collector_metrics_interval` steps, so it is reported as total / iterations).

    .venv/bin/python scripts/gpu/gpu_phases.py RUN_DIR --out benchmarks/archive/gpu/soak-short/phases.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from soaklab.bench.finished import RunFailed, completed_summary, report
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.host.info import git_state
from soaklab.metrics.events import current_tags, event_file, read_scalars
from soaklab.metrics.lumps import accumulated_per_iteration
from soaklab.metrics.tags import ACCUMULATED_TAGS, ITERATION_TAG

TARGET_ENV_STEPS_PER_S = 100_000
STEADY_FROM = 1000  # iterations: past learning_starts, compilation and the first checkpoint
PER_STEP = ("Perf/learner_inference_ms", "Perf/learner_ingress_ms", "Perf/learner_update_ms",
            ITERATION_TAG)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--curve-out", type=Path,
                        help="also write Train/mean_reward against env steps (every 50th iteration) as JSON")
    parser.add_argument("--steady-from", type=int, default=STEADY_FROM, help="first iteration of the steady state")
    parser.add_argument("--source", default="the gpu-short soak "
                        "(snakemake soak --cores 1 --configfile config/gpu-short.yaml)",
                        help="what produced the run dir (recorded in the JSON)")
    args = parser.parse_args()
    try:
        summary = completed_summary(args.run_dir)
    except RunFailed as exc:
        return report("gpu_phases", exc)
    run_config = read_json(args.run_dir / "run_config.json")
    algo = run_config["config"]["algo"]
    num_envs = algo["num_envs"]
    # Data-parallel runs: rank 0 logs one row per iteration for all ranks, each stepping num_envs.
    ranks = ((run_config["run"].get("data_parallel") or {}).get("ranks") or {}).get("resolved", 1)
    frame = current_tags(read_scalars(event_file(args.run_dir)))  # schema-1 runs too
    steady = frame[frame["step"] >= args.steady_from]
    iteration = steady[steady["tag"] == ITERATION_TAG].sort_values("step")
    iterations = len(iteration)
    wall = float(iteration["wall_time"].iloc[-1] - iteration["wall_time"].iloc[0])
    throughput = (iterations - 1) * num_envs * ranks / wall
    # Replay rows the learners sample per second, all ranks together (the seed's Rows/s).
    samples = (iterations - 1) * algo["batch_size"] * algo["updates_per_step"] * ranks / wall
    phases: dict[str, dict[str, float]] = {}
    for tag in PER_STEP:
        values = steady[steady["tag"] == tag]["value"]
        phases[tag.removeprefix("Perf/")] = {"median_ms": round(float(values.median()), 3),
                                             "mean_ms": round(float(values.mean()), 3)}
    for tag in ACCUMULATED_TAGS:
        per_iteration = accumulated_per_iteration(steady[steady["tag"] == tag])
        phases[tag.removeprefix("Perf/")] = {"mean_ms": None if per_iteration is None else round(per_iteration, 3)}
    record = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "source": args.source,
        "git": git_state(),
        "algo": summary["algo"], "num_envs": num_envs, "ranks": ranks,
        # The throughput levers this run used (docs/runtime.md, "GPU throughput").
        "settings": {"batch_size": algo["batch_size"], "updates_per_step": algo["updates_per_step"],
                     "compile": algo.get("compile", "eager"),
                     **{key: run_config["config"]["training"].get(key) for key in (
                         "collector_stream_priority", "mps_learner_thread_percentage",
                         "mps_collector_thread_percentage")}},
        "compile_ran": ((summary["runtime_manifest"].get("learner_diagnostics") or {}).get("cuda_graph") or {})
        .get("compile"),
        "nccl_environment": (summary["runtime_manifest"].get("data_parallel") or {}).get("nccl_environment"),
        "steady_state": {"from_iteration": args.steady_from, "iterations": iterations, "wall_s": round(wall, 2),
                         "env_steps_per_s": round(throughput, 1), "learner_samples_per_s": round(samples, 1)},
        "end_to_end_env_steps_per_s": round(summary["total_env_steps"] / summary["training_wall_time_sec"], 1),
        "target_env_steps_per_s": TARGET_ENV_STEPS_PER_S,
        "target_met": throughput >= TARGET_ENV_STEPS_PER_S,
        "phases_per_iteration": phases,
    }
    write_json_atomic(args.out, record)
    if args.curve_out is not None:
        reward = frame[frame["tag"] == "Train/mean_reward"].sort_values("step")
        reward = reward[reward["step"] % 50 == 0]
        write_json_atomic(args.curve_out, {
            "command": record["command"], "source": args.source, "algo": summary["algo"], "num_envs": num_envs,
            "tag": "Train/mean_reward", "env_steps": [int((s + 1) * num_envs) for s in reward["step"]],
            "values": [round(float(v), 5) for v in reward["value"]]})
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
