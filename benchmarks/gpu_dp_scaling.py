#!/usr/bin/env python3
"""Data-parallel scaling from two gpu_phases.py records of one run on N GPUs and on one GPU.

Both come from the same visit (config/gpu-x2.yaml runs the two soaks back to back); the ratio of
the steady-state aggregate env-steps/s and of the learner samples/s is checked against the target.

    .venv/bin/python benchmarks/gpu_dp_scaling.py PHASES_XN.json PHASES_X1.json --out scaling.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from soaklab.jsonfiles import write_json_atomic

TARGET_RATIO_AT_2 = 1.8  # of the one-GPU figure, at two GPUs (docs/runtime.md, "Data parallelism")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parallel", type=Path, help="gpu_phases.py JSON of the multi-GPU run")
    parser.add_argument("single", type=Path, help="gpu_phases.py JSON of the one-GPU run")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--machine", default="nvidia-h200-x2 (2 x NVIDIA H200)")
    args = parser.parse_args()
    many, one = (json.loads(p.read_text()) for p in (args.parallel, args.single))
    if one["ranks"] != 1 or many["ranks"] < 2:
        print(f"gpu_dp_scaling: expected a multi-rank and a one-rank record, got {many['ranks']} and "
              f"{one['ranks']}", file=sys.stderr)
        return 2
    target = TARGET_RATIO_AT_2 * many["ranks"] / 2
    ratios = {key: round(many["steady_state"][key] / one["steady_state"][key], 3)
              for key in ("env_steps_per_s", "learner_samples_per_s")}
    record = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "machine": args.machine,
        "ranks": many["ranks"],
        "nccl_environment": many.get("nccl_environment"),
        "parallel": {k: many["steady_state"][k] for k in ("env_steps_per_s", "learner_samples_per_s", "iterations")},
        "single": {k: one["steady_state"][k] for k in ("env_steps_per_s", "learner_samples_per_s", "iterations")},
        "iteration_ms_median": {"parallel": many["phases_per_iteration"]["iteration_ms"]["median_ms"],
                                "single": one["phases_per_iteration"]["iteration_ms"]["median_ms"]},
        "update_ms_median": {"parallel": many["phases_per_iteration"]["learner_update_ms"]["median_ms"],
                             "single": one["phases_per_iteration"]["learner_update_ms"]["median_ms"]},
        "ratio": ratios,
        "target_ratio": target,
        "target_met": all(r >= target for r in ratios.values()),
    }
    write_json_atomic(args.out, record)
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
