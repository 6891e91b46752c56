#!/usr/bin/env python3
"""Cart-pole swing-up learning through `soaklab train`, for both agents: the learning check, run as
a benchmark rather than a test because it takes minutes (SAC ~1 alone, FlashSAC ~4; on a host
running other trainers, many times that), and `make test` must hold on a busy host. `.ci/run` runs
it for SAC on its quiet machine, so CI still proves an agent learns through the real runtime.

Budget: 16 envs, 2000 iterations, 4 updates per step, batch 256, 128-wide networks; a random policy
earns ~15 per 250-step episode, the threshold is 50 (over three times that). Writes JSON with each
agent's final mean episode return and wall time; exits 1 if an agent stays below the threshold.

    .venv/bin/python benchmarks/cpu/cartpole_learning.py [--algos sac,flashsac] [--seeds 1,2,3] [--out benchmarks/cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from soaklab.host.info import git_state, host_record, versions
from soaklab.metrics.events import event_file, read_scalars

BUDGET = ("algo.num_envs=16", "algo.max_iterations=2000", "algo.updates_per_step=4", "algo.batch_size=256",
          "algo.actor_hidden=128", "algo.critic_hidden=128", "algo.num_blocks=2", "algo.learning_starts=50",
          "env.num_threads=2", "algo.save_interval=1000")
RANDOM_RETURN, THRESHOLD = 15.0, 50.0


def learn(algo: str, seed: int, workdir: Path, extra: list[str]) -> dict:
    run_dir = workdir / f"{algo}-{seed}"
    cmd = [sys.executable, "-m", "soaklab", "train", "--algo", algo, "--task", "cartpole_swingup", "--sim", "mujoco",
           *BUDGET, f"algo.seed={seed}", f"env.seed={seed}", *extra, f"training.log_dir={json.dumps(str(run_dir))}"]
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, SOAKLAB_TORCH_COMPILE="0"))
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"{algo}: soaklab train failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    frame = read_scalars(event_file(run_dir))
    returns = frame[frame["tag"] == "Train/mean_reward"].sort_values("step")["value"].tolist()
    return {"algo": algo, "seed": seed, "wall_s": round(wall, 1), "first_return": returns[0],
            "final_return": returns[-1], "learned": returns[-1] >= THRESHOLD, "curve_every_100": returns[::100]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", default="sac,flashsac")
    parser.add_argument("--seeds", default="1", help="comma list of seeds (algo.seed and env.seed)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/cpu"))
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="on top of the budget (experiments)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for algo in (a.strip() for a in args.algos.split(",") if a.strip()):
            for seed in seeds:
                row = learn(algo, seed, Path(tmp), args.overrides)
                rows.append(row)
                print(f"{row['algo']:>8} seed {seed}: final mean episode return {row['final_return']:.1f} "
                      f"(threshold {THRESHOLD:g}, random ~{RANDOM_RETURN:g}) in {row['wall_s']:.0f} s", flush=True)
    record = {"kind": "cartpole_learning", "command": " ".join(["python", *sys.argv]), "host": host_record(),
              "versions": versions(), "git": git_state(), "budget": list(BUDGET), "overrides": args.overrides,
              "seeds": seeds, "threshold": THRESHOLD, "random_return": RANDOM_RETURN, "results": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cartpole_learning.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0 if all(r["learned"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
