#!/usr/bin/env python3
"""Phase-local MuJoCo probe at 64, 256 and 1024 envs, and the ceiling's thread scaling.

Runs `soaklab bench backend` (which measures the env and, in the same run, its raw
physics ceiling) for each size on all cores, and at 256 and 1024 envs also on one
physics thread, then writes benchmarks/cpu/backend_probe_summary.json with the
env/ceiling ratios and the 2-thread/1-thread ceiling ratios.

    .venv/bin/python benchmarks/cpu/backend_probe.py [--out benchmarks/cpu]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from soaklab.files.jsonfiles import read_json

RUNS = [  # (envs, physics threads or None for all cores, warmup, iterations)
    (64, None, 20, 150),
    (256, None, 20, 80),
    (1024, None, 10, 40),
    (256, 1, 20, 60),
    (1024, 1, 10, 30),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/cpu"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for envs, threads, warmup, iters in RUNS:
        name = f"backend_mujoco_{envs}envs_{'all' if threads is None else threads}threads.json"
        cmd = [sys.executable, "-m", "soaklab", "bench", "backend", "--backends", "mujoco", "--num-envs", str(envs),
               "--warmup", str(warmup), "--iters", str(iters), "--output", str(args.out / name)]
        if threads is not None:
            cmd += ["--threads", str(threads)]
        print("$", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=True)
        results[(envs, threads)] = read_json(args.out / name)

    def probe(envs, threads):
        return results[(envs, threads)]["results"][0]

    first = results[(64, None)]
    summary = {
        "kind": "backend_probe_summary",
        "command": "python benchmarks/cpu/backend_probe.py",
        "host": first["host"],
        "versions": first["versions"],
        "git": first["git"],
        "env_over_ceiling": {
            str(envs): {
                "threads": probe(envs, None)["threads"],
                "env_steps_per_s": probe(envs, None)["throughput_env_control_steps_per_s"],
                "raw_ceiling_steps_per_s": probe(envs, None)["raw_physics_ceiling_env_steps_per_s"],
                "ratio": probe(envs, None)["env_over_ceiling"],
                "phases_ms": probe(envs, None)["phases"],
            }
            for envs in (64, 256, 1024)
        },
        "ceiling_thread_scaling": {
            str(envs): {
                "one_thread_ceiling": probe(envs, 1)["raw_physics_ceiling_env_steps_per_s"],
                "all_threads_ceiling": probe(envs, None)["raw_physics_ceiling_env_steps_per_s"],
                "all_threads": probe(envs, None)["threads"],
                "ratio": probe(envs, None)["raw_physics_ceiling_env_steps_per_s"]
                / probe(envs, 1)["raw_physics_ceiling_env_steps_per_s"],
            }
            for envs in (256, 1024)
        },
    }
    (args.out / "backend_probe_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    for envs, row in summary["env_over_ceiling"].items():
        print(f"{envs:>5} envs: env {row['env_steps_per_s']:8.0f}/s  ceiling {row['raw_ceiling_steps_per_s']:8.0f}/s"
              f"  ratio {row['ratio']:.1%}")
    for envs, row in summary["ceiling_thread_scaling"].items():
        print(f"{envs:>5} envs: ceiling {row['all_threads']} threads / 1 thread = {row['ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
