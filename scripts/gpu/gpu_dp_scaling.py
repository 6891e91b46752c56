#!/usr/bin/env python3
"""Data-parallel scaling from two gpu_phases.py records of one run on N GPUs and on one GPU.

Both come from the same visit (config/gpu-xN.yaml runs the two soaks back to back). For the
steady-state aggregate env-steps/s and learner samples/s: the ratio to one GPU and the scaling
efficiency (ratio / N), checked against the target at N (0.9 at two, 0.8 at four; reported only at
other counts). --allreduce adds scripts/gpu/gpu_allreduce.py's all-reduce time per update at N.

    .venv/bin/python scripts/gpu/gpu_dp_scaling.py PHASES_XN.json PHASES_X1.json \
        [--allreduce A.json] --out scaling.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from soaklab.files.jsonfiles import read_json, write_json_atomic

# Scaling efficiency (throughput / (GPUs x one-GPU throughput)) each GPU count must reach: 1.8x at two
# (docs/runtime.md, "Data parallelism"), 0.8 at four; eight is reported against no target.
TARGET_EFFICIENCY = {2: 0.9, 4: 0.8}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parallel", type=Path, help="gpu_phases.py JSON of the multi-GPU run")
    parser.add_argument("single", type=Path, help="gpu_phases.py JSON of the one-GPU run")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--machine", default="nvidia-h200-x2 (2 x NVIDIA H200)")
    parser.add_argument("--allreduce", type=Path, help="scripts/gpu/gpu_allreduce.py JSON of the same visit")
    args = parser.parse_args()
    many, one = (read_json(p) for p in (args.parallel, args.single))
    if one["ranks"] != 1 or many["ranks"] < 2:
        print(f"gpu_dp_scaling: expected a multi-rank and a one-rank record, got {many['ranks']} and "
              f"{one['ranks']}", file=sys.stderr)
        return 2
    ranks = many["ranks"]
    target = TARGET_EFFICIENCY.get(ranks)
    ratios = {key: round(many["steady_state"][key] / one["steady_state"][key], 3)
              for key in ("env_steps_per_s", "learner_samples_per_s")}
    efficiency = {key: round(ratio / ranks, 3) for key, ratio in ratios.items()}
    allreduce = None
    if args.allreduce is not None:
        measured = read_json(args.allreduce)
        allreduce = {"world": measured["world"], "nccl_environment": measured["nccl_environment"],
                     "per_update_ms_median": {k: v["median_ms"] for k, v in measured["variants"].items()},
                     "bytes_per_update": {k: v["bytes"] for k, v in measured["variants"].items()},
                     "ceiling_bus_gb_per_s": measured["ceiling"]["bus_gb_per_s"]}
    record = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "machine": args.machine,
        "ranks": ranks,
        "nccl_environment": many.get("nccl_environment"),
        "parallel": {k: many["steady_state"][k] for k in ("env_steps_per_s", "learner_samples_per_s", "iterations")},
        "single": {k: one["steady_state"][k] for k in ("env_steps_per_s", "learner_samples_per_s", "iterations")},
        "iteration_ms_median": {"parallel": many["phases_per_iteration"]["iteration_ms"]["median_ms"],
                                "single": one["phases_per_iteration"]["iteration_ms"]["median_ms"]},
        "update_ms_median": {"parallel": many["phases_per_iteration"]["learner_update_ms"]["median_ms"],
                             "single": one["phases_per_iteration"]["learner_update_ms"]["median_ms"]},
        "ratio": ratios,
        "efficiency": efficiency,
        "target_efficiency": target,
        "target_met": None if target is None else all(e >= target for e in efficiency.values()),
        "allreduce": allreduce,
    }
    write_json_atomic(args.out, record)
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
