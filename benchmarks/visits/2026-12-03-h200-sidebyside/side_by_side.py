"""FlashSAC beside mjlab's PPO on the same G1 clip and GPU: one table and one figure (issue 29).

Joins what `benchmarks/visits/2026-12-03-h200-sidebyside/side_by_side.sh` brings back from one visit: mjlab's run
(`scripts/gpu/mjlab_ppo.py`), FlashSAC's (`scripts/gpu/g1_learning.py run`) with its phases
(`scripts/gpu/gpu_phases.py`), and the raw physics ceiling (`scripts/gpu/warmup.py`), into JSON (the
inputs' commands and commits, one row per learner) and a PNG of the time-out share and body error
against wall clock:

    python benchmarks/visits/2026-12-03-h200-sidebyside/side_by_side.py --mjlab mjlab_ppo.json --mjlab-log mjlab-ppo \\
        --flashsac flashsac-4096.json --phases flashsac-phases.json --ceiling ceiling.json --out side_by_side.json

Both learners' wall clock counts from the start of learning (mjlab's from its runner's first
iteration, FlashSAC's from its first logged iteration). The time-out share is each project's own:
soaklab's episodes end by time-out at the clip's end, mjlab's only after 10 s (the clip restarts
within an episode), so the same share is a harder bar for mjlab's PPO; body error and episode length
are in the table for that reason.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import JSONRefused, read_json, write_json_atomic
from soaklab.host.info import git_state

# mjlab's PPO driver lives in scripts/gpu/ (stage_mjlab.sh stages its wheels); this one-off reads its helpers.
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "gpu"))
from mjlab_ppo import TIMEOUT_SHARE_TARGET, read_log, summarise  # noqa: E402

T = TypeVar("T")


def load(path: Path, option: str, kind: str | None) -> dict[str, Any]:
    try:
        payload = read_json(path)
    except JSONRefused as exc:  # its line names the file and what is wrong; this one names the flag too
        raise InvalidInput(f"{option} {exc}") from None
    except OSError as exc:
        raise InvalidInput(f"{option} {path}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    if not isinstance(payload, dict) or (kind is not None and payload.get("kind") != kind):
        found = payload.get("kind") if isinstance(payload, dict) else type(payload).__name__
        raise InvalidInput(f"{option} {path}: kind {found!r}, expected {kind!r}")
    return payload


def fields(build: Callable[[], T], inputs: str) -> T:
    """build() over hand-written or truncated inputs: a missing field is named, not a traceback."""
    try:
        return build()
    except (KeyError, IndexError, TypeError) as exc:
        raise InvalidInput(f"{inputs}: missing or malformed field {exc}; expected the benchmark's own JSON") from exc


def mjlab_results(record: dict[str, Any], log_dir: Path | None) -> dict[str, Any]:
    """The run's summary, re-read from its event files when given (a JSON from before the tracking
    figures were summarised still yields them: its curve's seconds give the start of learning)."""
    results = record["results"]
    if log_dir is None:
        return results
    frame = read_log(log_dir)
    if frame.empty:
        raise InvalidInput(f"--mjlab-log {log_dir}: no event files with scalars")
    first = results["curve"][0]
    started = float(frame[frame["step"] == first["iteration"]]["wall_time"].max()) - first["seconds"]
    num_envs = record["settings"]["num_envs"]
    return summarise(frame, started, num_envs, results["env_steps_per_iteration"] // num_envs)


def flashsac_row(record: dict[str, Any], phases: dict[str, Any]) -> dict[str, Any]:
    num_envs = record["num_envs"]
    reached = next((p for p in record["curve"]
                    if p["timeout_fraction"] is not None and p["timeout_fraction"] >= TIMEOUT_SHARE_TARGET), None)
    final = record["final"]
    return {
        "learner": "soaklab FlashSAC (recipe defaults, CUDA MPS)", "num_envs": num_envs,
        "steady_env_steps_per_s": phases["steady_state"]["env_steps_per_s"],
        "end_to_end_env_steps_per_s": phases["end_to_end_env_steps_per_s"],
        "timeout_share_reached_after_s": reached["wall_s"] if reached else None,
        "timeout_share_reached_at_env_steps": reached["iteration"] * num_envs if reached else None,
        "final_timeout_share": final["timeout_fraction"], "final_body_error_m": final["body_pos_error_m"],
        "final_episode_length": final["episode_length"], "episode_time_limit": "the clip's end",
        "env_steps": record["total_env_steps"], "budget_minutes": record["budget_minutes"],
        "command": record["command"], "git": record["git"],
        # Before the first episode ends the run logs a body error of 0 and no share: no figure yet.
        "curve": [{"seconds": p["wall_s"], "timeout_share": p["timeout_fraction"],
                   "body_error_m": p["body_pos_error_m"]}
                  for p in record["curve"] if p["timeout_fraction"] is not None],
    }


def mjlab_row(record: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    return {
        "learner": f"mjlab {record['versions'].get('mjlab')} PPO (rsl-rl {record['versions'].get('rsl-rl-lib')})",
        "num_envs": record["settings"]["num_envs"],
        "steady_env_steps_per_s": results["steady_env_steps_per_s"], "end_to_end_env_steps_per_s": None,
        "timeout_share_reached_after_s": results["timeout_share_reached_after_s"],
        "timeout_share_reached_at_env_steps": results["timeout_share_reached_at_env_steps"],
        "final_timeout_share": results["final_timeout_share"], "final_body_error_m": results.get("final_body_error_m"),
        "final_episode_length": results.get("final_episode_length"), "episode_time_limit": "10 s (500 steps)",
        "env_steps": results["iterations"] * results["env_steps_per_iteration"],
        "budget_minutes": record["settings"]["minutes"], "command": record["command"], "git": record["git"],
        "curve": [{"seconds": p["seconds"], "timeout_share": p["timeout_share"],
                   "body_error_m": p.get("body_error_m")} for p in results["curve"]],
    }


def ceiling_at(ceilings: list[dict[str, Any]], worlds: int) -> dict[str, Any] | None:
    """The raw physics ceiling at `worlds` from the first warm-up JSON that timed it."""
    for ceiling in ceilings:
        for run in ceiling["runs"]:
            if run["worlds"] == worlds:
                return {"env_steps_per_s": run["env_steps_per_s"], "control_step_ms": run["control_step_ms_median"],
                        "njmax": ceiling["njmax"], "device": ceiling["device"]}
    return None


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for row in rows:
        for ax, key in zip(axes, ("timeout_share", "body_error_m"), strict=True):
            points = [(p["seconds"] / 60, p[key]) for p in row["curve"] if p[key] is not None]
            ax.plot([x for x, _ in points], [y for _, y in points], linewidth=1,
                    label=f"{row['learner']}, {row['num_envs']} envs")
    axes[0].axhline(TIMEOUT_SHARE_TARGET, linestyle=":", color="grey")
    axes[0].set_ylabel("time-out share (each project's own limit)")
    axes[1].set_ylabel("body position error (m)")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("wall clock from the start of learning (min)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mjlab", type=Path, required=True, help="scripts/gpu/mjlab_ppo.py's JSON")
    parser.add_argument("--mjlab-log", type=Path, help="its TensorBoard folder: re-read the tracking figures")
    parser.add_argument("--flashsac", type=Path, required=True, help="scripts/gpu/g1_learning.py run's JSON")
    parser.add_argument("--phases", type=Path, required=True, help="scripts/gpu/gpu_phases.py's JSON of that run")
    parser.add_argument("--ceiling", type=Path, action="append", default=[], help="scripts/gpu/warmup.py's JSON")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.out.suffix != ".json" or not args.out.parent.is_dir():
            raise InvalidInput(f"--out {args.out}: expected a .json file in an existing folder")
        if args.mjlab_log is not None and not args.mjlab_log.is_dir():
            raise InvalidInput(f"--mjlab-log {args.mjlab_log}: no such folder")
        mjlab = load(args.mjlab, "--mjlab", "mjlab_ppo")
        flashsac = load(args.flashsac, "--flashsac", "g1_learning_curve")
        phases = load(args.phases, "--phases", None)
        if "steady_state" not in phases:
            raise InvalidInput(f"--phases {args.phases}: no steady_state; expected scripts/gpu/gpu_phases.py's JSON")
        ceilings = [load(path, "--ceiling", None) for path in args.ceiling]
        rows = [fields(lambda: flashsac_row(flashsac, phases), f"--flashsac {args.flashsac} / --phases {args.phases}"),
                fields(lambda: mjlab_row(mjlab, mjlab_results(mjlab, args.mjlab_log)), f"--mjlab {args.mjlab}")]
        for path, ceiling in zip(args.ceiling, ceilings, strict=True):
            fields(lambda ceiling=ceiling: ceiling_at([ceiling], 0), f"--ceiling {path}")
        if len({row["num_envs"] for row in rows}) != 1:
            raise InvalidInput(f"--mjlab {args.mjlab}: {rows[1]['num_envs']} envs, FlashSAC's run "
                               f"{rows[0]['num_envs']}; a side-by-side compares the same count")
    except InvalidInput as exc:
        print(f"side_by_side: error: {exc}", file=sys.stderr)
        return 2
    ceiling = ceiling_at(ceilings, rows[0]["num_envs"])
    for row in rows:
        row["share_of_ceiling"] = (row["steady_env_steps_per_s"] / ceiling["env_steps_per_s"]
                                   if ceiling and row["steady_env_steps_per_s"] else None)
    record = {"kind": "side_by_side",
              "command": " ".join(["python benchmarks/visits/2026-12-03-h200-sidebyside/side_by_side.py",
                                   *(argv if argv is not None else sys.argv[1:])]),
              "git": git_state(), "machine": flashsac["host"], "timeout_share_target": TIMEOUT_SHARE_TARGET,
              "ceiling": ceiling, "rows": rows}
    write_json_atomic(args.out, record)
    plot(rows, args.out.with_suffix(".png"))
    for row in rows:
        print(f"{row['learner']}: steady {row['steady_env_steps_per_s']} env-steps/s; time-out share >= "
              f"{TIMEOUT_SHARE_TARGET} after {row['timeout_share_reached_after_s']} s; final share "
              f"{row['final_timeout_share']}, body error {row['final_body_error_m']} m")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
