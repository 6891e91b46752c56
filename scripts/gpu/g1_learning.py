#!/usr/bin/env python3
"""G1 tracking learning curves against the zero-action baseline and the kinematic-replay bound.

`run`: runs `soaklab train` on G1 motion tracking with the given overrides and a
wall-clock budget of --minutes (training.max_wall_minutes: the run ends completed,
stop reason time_budget, with its final checkpoint), and reads its TensorBoard
curves: mean episode return, episode length, share of episodes ending by time-out
and body/joint tracking error, against wall-clock time and env steps. Writes
<out>/<label>.json and <label>.png.

`baselines`: scores the same task (same clip, start-state sampling, reward) two ways
without a learner, on the CPU MuJoCo env: zero actions (hold the default pose), and
kinematic replay (the robot put exactly on the reference every step: what perfect
tracking earns). Writes <out>/baselines.json; `run` draws them when present.

`table`: one row per run JSON of a folder (the ablation table), as <out>/ablation.json
and a Markdown table on stdout.

    .venv/bin/python scripts/gpu/g1_learning.py baselines --out benchmarks/cpu/learning
    .venv/bin/python scripts/gpu/g1_learning.py run --algo flashsac --sim mujoco --minutes 20 \
        --label flashsac-cpu --out benchmarks/cpu/learning algo.num_envs=64
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from soaklab.assets.record import assets_record
from soaklab.bench.budgeted import budget_override, run_budgeted
from soaklab.bench.finished import RunFailed, completed_summary, report
from soaklab.config.compose import compose
from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import read_json
from soaklab.host.info import git_state, host_record, versions
from soaklab.metrics.events import current_tags, event_file, read_events
from soaklab.metrics.tags import ITERATION_TAG
from soaklab.rl.logging import EpisodeStats
from soaklab.tasks.env import EnvSpec
from soaklab.tasks.registry import make_env

MANIFEST = Path("results/assets/manifest.json")
CURVES = {"return": "Train/mean_reward", "episode_length": "Train/episode_length",
          "timeout_fraction": "Train/timeout_fraction", "body_pos_error_m": "Train/tracking/body_pos_error_m",
          "joint_pos_error_rad": "Train/tracking/joint_pos_error_rad"}
# A motion library's per-clip tags (soaklab.tasks.metrics.per_clip_metrics, logged as Train/<name>):
# episode ends, from which each clip's time-out share is computed as the run-wide one is, and tracking.
CLIP_TAG = "Train/clip/"
CLIP_TAGS = {"terminated": "episodes/terminated", "truncated": "episodes/truncated",
             "body_pos_error_m": "tracking/body_pos_error_m"}
CLIP_CURVES = ("timeout_fraction", "body_pos_error_m")
SMOOTH = 20  # points of the logged curves averaged per plotted point


def baseline_env(num_envs: int, overrides: list[str]) -> Any:
    assets = assets_record(MANIFEST)
    run = compose("sac", "g1_motion_tracking", "mujoco",
                  [f"algo.num_envs={num_envs}", *overrides, f"env.motion={json.dumps(assets['motion'])}"]).run
    return make_env(run, EnvSpec.of(run), Path(assets["scene"]), compile_terms=False)


def score(env: Any, steps: int, replay: bool) -> dict[str, Any]:
    """Mean return/length of finished episodes, time-out share and tracking error, with zero
    actions (physics runs) or by kinematic replay (the state is set to the reference each step)."""
    stats = EpisodeStats(env.num_envs)
    ends = {"terminated": 0, "truncated": 0}
    errors = {"body_pos_error_m": [], "joint_pos_error_rad": []}
    env.reset()
    zeros = torch.zeros(env.num_envs, 29)
    for _ in range(steps):
        if replay:
            env.episode_step += 1
            env.set_reference_state()
            terms, metrics, terminated, _, _ = env.step_terms(env.frame, zeros, env.last_action)
            reward = torch.stack(list(terms.values())).sum(0)
            truncated = ((env.episode_step >= env.max_episode_steps) | (env.frame >= env.num_frames - 1)) & ~terminated
            done = terminated | truncated
            env.reset(done)
        else:
            result = env.step(zeros)
            reward, terminated, truncated, metrics = result.reward, result.terminated, result.truncated, result.metrics
            done = terminated | truncated
        stats.observe(reward, done)
        ends["terminated"] += int(terminated.sum())
        ends["truncated"] += int(truncated.sum())
        for name in errors:
            errors[name].append(float(metrics[name].mean()))
    ended = ends["terminated"] + ends["truncated"]
    return {"return": stats.mean_return, "episode_length": stats.mean_length,
            "timeout_fraction": ends["truncated"] / ended if ended else None,
            **{name: sum(v) / len(v) for name, v in errors.items()}, "steps": steps, "num_envs": env.num_envs,
            "episodes": ended}


def cmd_baselines(args: argparse.Namespace) -> int:
    record: dict[str, Any] = {"kind": "g1_learning_baselines", "command": " ".join(sys.argv), "host": host_record(),
                              "versions": versions(), "git": git_state(), "overrides": args.overrides}
    for name, replay in (("zero_action", False), ("kinematic_replay", True)):
        env = baseline_env(args.num_envs, args.overrides)
        record[name] = score(env, args.steps, replay)
        env.close()
        print(name, json.dumps(record[name]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "baselines.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


def clip_labels_logged(tags: Any) -> list[str]:
    """The clips of a motion library run, from its Train/clip/<label>/... tags (none for one clip)."""
    return sorted({tag.split("/")[2] for tag in tags if tag.startswith(CLIP_TAG) and tag.count("/") >= 3})


def clip_curve_keys(labels: list[str]) -> list[str]:
    return [f"clip/{label}/{key}" for label in labels for key in CLIP_CURVES]


def curves(run_dir: Path) -> tuple[list[dict[str, Any]], int]:
    """One point per logged iteration: the whole run's curves, then (a motion library) each clip's
    time-out share and tracking error, which the run-wide figures blend: a short clip's many ends
    outweigh a long clip's few in the run-wide time-out share."""
    frame = current_tags(read_events(event_file(run_dir))[0])  # schema-1 runs too
    num_envs = read_json(run_dir / "run_config.json")["config"]["algo"]["num_envs"] \
        if (run_dir / "run_config.json").is_file() else None
    time_points = frame[frame["tag"] == ITERATION_TAG].sort_values("step")
    if time_points.empty:
        raise RunFailed(f"{run_dir}: its event file holds no {ITERATION_TAG} rows; no iteration was logged")
    t0 = float(time_points["wall_time"].iloc[0] - time_points["value"].iloc[0] / 1e3)
    labels = clip_labels_logged(frame["tag"].unique())
    clip_tags = [f"{CLIP_TAG}{label}/{tag}" for label in labels for tag in CLIP_TAGS.values()]
    table = frame[frame["tag"].isin([*CURVES.values(), *clip_tags])].pivot_table(
        index="step", columns="tag", values="value")
    walls = frame[frame["tag"] == ITERATION_TAG].set_index("step")["wall_time"]

    def value(row: Any, tag: str) -> float | None:
        got = row.get(tag)
        return None if got is None or got != got else float(got)

    points = []
    for step, row in table.iterrows():
        point: dict[str, Any] = {"iteration": int(step), "wall_s": round(float(walls.get(step, float("nan")) - t0), 2)}
        for name, tag in CURVES.items():
            point[name] = value(row, tag)
        for label in labels:
            got = {name: value(row, f"{CLIP_TAG}{label}/{tag}") for name, tag in CLIP_TAGS.items()}
            ended = (got["terminated"] or 0.0) + (got["truncated"] or 0.0)
            point[f"clip/{label}/timeout_fraction"] = (got["truncated"] or 0.0) / ended if ended > 0 else None
            point[f"clip/{label}/body_pos_error_m"] = got["body_pos_error_m"]
        points.append(point)
    return points, num_envs


def clips_of(points: list[dict[str, Any]]) -> list[str]:
    """The clip labels a curve carries per-clip figures for."""
    return sorted({key.split("/")[1] for key in (points[0] if points else {}) if key.startswith("clip/")})


def smoothed(points: list[dict[str, Any]], key: str) -> list[tuple[float, float, float]]:
    """(wall_s, iteration, value) averaged over SMOOTH consecutive logged points."""
    series = [(p["wall_s"], p["iteration"], p[key]) for p in points if p[key] is not None]
    out = []
    for i in range(0, len(series), SMOOTH):
        chunk = series[i:i + SMOOTH]
        out.append((chunk[-1][0], chunk[-1][1], sum(c[2] for c in chunk) / len(chunk)))
    return out


def window_mean(points: list[dict[str, Any]], key: str, last: int = 200) -> float | None:
    values = [p[key] for p in points if p[key] is not None][-last:]
    return sum(values) / len(values) if values else None


def plot(record: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points, num_envs, base = record["curve"], record["num_envs"], record.get("baselines") or {}
    panels = [("return", "mean episode return"), ("episode_length", "episode length (steps)"),
              ("timeout_fraction", "episodes ending by time-out"), ("body_pos_error_m", "body position error (m)")]
    fig, axes = plt.subplots(len(panels), 2, figsize=(11, 11), sharex="col")
    for row, (key, label) in enumerate(panels):
        series = smoothed(points, key)
        for col, (x_of, xlabel) in enumerate(((lambda s: s[0] / 60, "wall-clock (min)"),
                                              (lambda s: s[1] * num_envs / 1e6, "env steps (M)"))):
            ax = axes[row, col]
            ax.plot([x_of(s) for s in series], [s[2] for s in series], label=record["label"], linewidth=1)
            for clip in clips_of(points) if key in CLIP_CURVES else ():
                per_clip = smoothed(points, f"clip/{clip}/{key}")
                ax.plot([x_of(s) for s in per_clip], [s[2] for s in per_clip], label=clip, linewidth=0.8,
                        linestyle="-.")
            for name, style in (("zero_action", ":"), ("kinematic_replay", "--")):
                value = (base.get(name) or {}).get(key)
                if value is not None:
                    ax.axhline(value, linestyle=style, color="grey", label=name.replace("_", " "))
            ax.set_ylabel(label if col == 0 else "")
            ax.grid(alpha=0.3)
            if row == len(panels) - 1:
                ax.set_xlabel(xlabel)
            if row == 0 or (key in CLIP_CURVES and clips_of(points)):
                ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"{record['label']}: {record['train_command']}", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# The wall-clock budget ends the run, so iterations are unbounded; one checkpoint (the final one)
# unless the caller asks for more, e.g. algo.save_interval=4000 for a success-against-minutes table.
RUN_DEFAULTS = {"algo.max_iterations": "100000000", "algo.save_interval": "100000000"}


def run_defaults(overrides: list[str]) -> list[str]:
    """RUN_DEFAULTS as overrides, less the keys the caller gives (an override is given only once)."""
    given = {o.split("=", 1)[0] for o in overrides}
    return [f"{key}={value}" for key, value in RUN_DEFAULTS.items() if key not in given]


def cmd_run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(dir=args.scratch) as tmp:
        # --keep-run: the run dir outlives the benchmark (its final checkpoint, written when the budget
        # ends the run, is the policy that `soaklab evaluate` then judges).
        run_dir = args.keep_run if args.keep_run is not None else Path(tmp) / "run"
        if args.keep_run is not None and args.keep_run.exists():
            print(f"--keep-run {args.keep_run}: exists; give a new directory", file=sys.stderr)
            return 2
        cmd = [sys.executable, "-m", "soaklab", "train", "--algo", args.algo, "--task", "g1_motion_tracking",
               "--sim", args.sim, *run_defaults(args.overrides), *args.overrides, budget_override(args.minutes),
               f"training.log_dir={run_dir}"]
        print("$", " ".join(cmd[1:]), flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        log = open(args.out / f"{args.label}.train.log", "w") if args.keep_log else subprocess.DEVNULL
        run_budgeted(cmd, args.minutes, log)
        try:
            summary = completed_summary(run_dir)
            points, num_envs = curves(run_dir)
        except (RunFailed, InvalidInput) as exc:  # e.g. an MPS client refused at iteration 0: its cause
            return report(f"g1_learning run {args.label}", exc,
                          args.out / f"{args.label}.train.log" if args.keep_log else None)
    baselines_path = args.out / "baselines.json"
    record = {
        "kind": "g1_learning_curve", "label": args.label, "algo": args.algo, "sim": args.sim,
        "command": " ".join(sys.argv), "train_command": " ".join(["soaklab", *cmd[3:-1]]),
        "host": host_record(), "versions": versions(), "git": git_state(), "budget_minutes": args.minutes,
        "run_dir": str(args.keep_run) if args.keep_run is not None else None,
        "num_envs": num_envs, "status": summary["status"], "stop_reason": summary.get("stop_reason"),
        "completed_iterations": summary["completed_iterations"],
        "total_env_steps": summary["total_env_steps"], "training_wall_time_sec": summary["training_wall_time_sec"],
        "final": {key: window_mean(points, key) for key in (*CURVES, *clip_curve_keys(clips_of(points)))},
        "baselines": read_json(baselines_path) if baselines_path.is_file() else None,
        "curve": points[:: max(1, len(points) // 2000)],
    }
    (args.out / f"{args.label}.json").write_text(json.dumps(record, indent=1) + "\n")
    plot(record, args.out / f"{args.label}.png")
    print(f"{args.label}: {summary['completed_iterations']} iterations, {summary['total_env_steps']} env steps, "
          f"final {json.dumps(record['final'])}", flush=True)
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    rows = []
    for path in sorted(args.out.glob("*.json")):
        record = read_json(path)
        if record.get("kind") != "g1_learning_curve":
            continue
        rows.append({"label": record["label"], "overrides": record["train_command"].split(" ", 7)[-1],
                     "env_steps_M": round(record["total_env_steps"] / 1e6, 2),
                     "minutes": round(record["training_wall_time_sec"] / 60, 1),
                     **{k: (None if v is None else round(v, 3)) for k, v in record["final"].items()}})
    (args.out / "ablation.json").write_text(json.dumps({"kind": "g1_learning_ablation", "rows": rows}, indent=1)
                                            + "\n")
    keys = ["label", "env_steps_M", "minutes", *CURVES, "overrides"]
    print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    base = sub.add_parser("baselines")
    base.add_argument("--num-envs", type=int, default=64)
    base.add_argument("--steps", type=int, default=1000)
    base.add_argument("--out", type=Path, required=True)
    base.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    base.set_defaults(func=cmd_baselines)
    run = sub.add_parser("run")
    run.add_argument("--algo", required=True, choices=["sac", "flashsac"])
    run.add_argument("--sim", default="mujoco", choices=["mujoco", "mjwarp"])
    run.add_argument("--minutes", type=float, default=20.0)
    run.add_argument("--label", required=True)
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--scratch", type=Path, default=None, help="where the run dir lives meanwhile")
    run.add_argument("--keep-log", action="store_true", help="keep the trainer's output as <label>.train.log")
    run.add_argument("--keep-run", type=Path, default=None, metavar="DIR",
                     help="train into DIR (a new directory) and keep it: checkpoints, events, run summary")
    run.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    run.set_defaults(func=cmd_run)
    table = sub.add_parser("table")
    table.add_argument("--out", type=Path, required=True)
    table.set_defaults(func=cmd_table)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
