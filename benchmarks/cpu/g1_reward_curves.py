#!/usr/bin/env python3
"""20-minute CPU G1 reward curves for an agent, against the zero-action baseline.

Runs `soaklab train` on G1 motion tracking (MuJoCo, CPU learner) with a large
iteration count and a wall-clock budget of --minutes (training.max_wall_minutes:
the run ends completed, stop reason time_budget), and reads its TensorBoard curve.
The baseline is the same env driven with zero actions for the same number of env
steps per env as a 10 s episode allows, scored the same way (mean return of
finished episodes). Writes benchmarks/cpu/g1_reward_curve_<algo>.json.

    .venv/bin/python benchmarks/cpu/g1_reward_curves.py --algo sac [--minutes 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from soaklab.assets.record import assets_record
from soaklab.bench.budgeted import budget_override, run_budgeted
from soaklab.bench.finished import RunFailed, completed_summary, report
from soaklab.config.compose import compose
from soaklab.host.info import git_state, host_record, versions
from soaklab.metrics.tags import ITERATION_TAG
from soaklab.rl.logging import EpisodeStats
from soaklab.tasks.env import EnvSpec
from soaklab.tasks.registry import make_env

MANIFEST = Path("results/assets/manifest.json")
OVERRIDES = ["algo.num_envs=64", "algo.max_iterations=1000000", "algo.batch_size=512",
             "algo.replay_buffer_size=300000", "algo.learning_starts=50", "algo.save_interval=100000"]


def zero_action_baseline(steps: int) -> dict:
    assets = assets_record(MANIFEST)
    run = compose("sac", "g1_motion_tracking", "mujoco",
                  [*OVERRIDES, f"env.motion={json.dumps(assets['motion'])}"]).run
    env = make_env(run, EnvSpec.of(run), Path(assets["scene"]))
    stats = EpisodeStats(env.num_envs)
    env.reset()
    zeros = torch.zeros(env.num_envs, 29)
    for _ in range(steps):
        r = env.step(zeros)
        stats.observe(r.reward, r.done)
    env.close()
    return {"mean_episode_return": stats.mean_return, "mean_episode_length": stats.mean_length,
            "mean_step_reward": stats.step_reward, "steps": steps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", required=True, choices=["sac", "flashsac"])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/cpu"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "soaklab", "train", "--algo", args.algo, "--task", "g1_motion_tracking",
               "--sim", "mujoco", *OVERRIDES, budget_override(args.minutes), f"training.log_dir={run_dir}"]
        print("$", " ".join(cmd[1:]), flush=True)
        run_budgeted(cmd, args.minutes)
        try:
            summary = completed_summary(run_dir)
        except RunFailed as exc:
            return report(f"g1_reward_curves {args.algo}", exc)
        acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        acc.Reload()
        tag = ITERATION_TAG if ITERATION_TAG in acc.Tags()["scalars"] else "Perf/iteration_time"  # schema 1
        t0 = acc.Scalars(tag)[0].wall_time
        curve = [{"iteration": e.step, "wall_s": round(e.wall_time - t0, 2), "mean_episode_return": e.value}
                 for e in acc.Scalars("Train/mean_reward")]
        lengths = {e.step: e.value for e in acc.Scalars("Train/episode_length")}
        for point in curve:
            point["mean_episode_length"] = lengths.get(point["iteration"])
    baseline = zero_action_baseline(steps=600)
    every = max(1, len(curve) // 200)
    record = {
        "kind": "g1_reward_curve", "algo": args.algo,
        "command": f"python benchmarks/cpu/g1_reward_curves.py --algo {args.algo} --minutes {args.minutes:g}",
        "train_command": " ".join(["soaklab", *cmd[3:-1], "training.log_dir=<tmp>"]),
        "host": host_record(), "versions": versions(), "git": git_state(),
        "budget_minutes": args.minutes,
        "status": summary["status"], "stop_reason": summary.get("stop_reason"),
        "completed_iterations": summary["completed_iterations"], "total_env_steps": summary["total_env_steps"],
        "final": curve[-1] if curve else None,
        "zero_action_baseline": baseline,
        "curve": curve[::every],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"g1_reward_curve_{args.algo}.json").write_text(json.dumps(record, indent=2) + "\n")
    final = record["final"] or {}
    print(f"{args.algo}: {summary['completed_iterations']} iterations, final mean episode return "
          f"{final.get('mean_episode_return')}, zero-action baseline {baseline['mean_episode_return']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
