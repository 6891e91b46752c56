#!/usr/bin/env python3
"""Learning before and after the GPU runtime work: Train/mean_reward against env steps.

`--before`: a soak's console log (its `train: it N/M | ... | episode return X` lines, every
5 s); `--after`: the reward curve JSON that `scripts/gpu/gpu_phases.py --curve-out` wrote from
a soak's event file (every 50th iteration). Both are the same statistic: the mean return of the
last 100 finished episodes. Writes a JSON with both series and the comparison at the shorter
run's last env step (the mean over the last `--window` env steps before it, in each run), and a
PNG of both curves.

    .venv/bin/python benchmarks/archive/gpu/gpu_reward_compare.py \\
        --before benchmarks/archive/gpu/soak-short-before/soak-console.log \\
        --after benchmarks/archive/gpu/soak-short/reward_curve.json --out benchmarks/archive/gpu/reward_compare
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from soaklab.files.jsonfiles import read_json

LINE = re.compile(r"train: it (\d+)/\d+ \| .*? \| episode return ([-0-9.]+) \|")


def console_curve(path: Path, num_envs: int) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for match in LINE.finditer(path.read_text(errors="replace")):
        steps.append(int(match.group(1)) * num_envs)
        values.append(float(match.group(2)))
    return steps, values


def window_mean(steps: list[int], values: list[float], end: int, width: int) -> float:
    picked = [v for s, v in zip(steps, values, strict=True) if end - width <= s <= end]
    return statistics.mean(picked)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="console log of the earlier soak")
    parser.add_argument("--before-label", default="before (serial runtime, 2026-11-29)")
    parser.add_argument("--after", type=Path, required=True, help="reward curve JSON of the new soak")
    parser.add_argument("--after-label", default="after (captured learner, overlapped schedule)")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--window", type=int, default=1_000_000, help="env steps averaged before the mark")
    parser.add_argument("--out", type=Path, required=True, help="output stem: writes STEM.json and STEM.png")
    args = parser.parse_args()
    before_steps, before_values = console_curve(args.before, args.num_envs)
    after = read_json(args.after)
    after_steps, after_values = after["env_steps"], after["values"]
    mark = min(before_steps[-1], after_steps[-1])
    before_at = window_mean(before_steps, before_values, mark, args.window)
    after_at = window_mean(after_steps, after_values, mark, args.window)
    record = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "statistic": "Train/mean_reward (mean return of the last 100 finished episodes)",
        "compared_at_env_steps": mark, "window_env_steps": args.window,
        "before": {"label": args.before_label, "mean_in_window": before_at, "last": before_values[-1],
                   "env_steps": before_steps, "values": before_values},
        "after": {"label": args.after_label, "mean_in_window": after_at,
                  "env_steps": after_steps, "values": after_values},
        "after_at_least_before": after_at >= before_at,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    ax.plot([s / 1e6 for s in before_steps], before_values, label=args.before_label)
    ax.plot([s / 1e6 for s in after_steps], after_values, label=args.after_label)
    ax.axvline(mark / 1e6, color="grey", linestyle=":", label=f"compared at {mark / 1e6:.1f} M env steps")
    ax.set_xlabel("env steps (millions)")
    ax.set_ylabel("Train/mean_reward")
    ax.set_title("FlashSAC, G1 motion tracking, MJWarp, 1024 envs, H200")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"))
    print(f"at {mark:,} env steps (mean over the last {args.window:,}): before {before_at:.3f}, "
          f"after {after_at:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
