"""mjlab's PPO on the same G1 tracking clip: the side-by-side reference for FlashSAC (issue 29).

Runs mjlab's own G1 flat tracking task (`unitree_g1_flat_tracking_env_cfg`, its PPO runner config)
on the clip soaklab trains on, through mjlab's generic rsl-rl runner, for a wall-clock budget, and
writes JSON: the command, machine, versions, commit, the steady-state env-steps/s (median of
rsl-rl's `Perf/total_fps` after the first iterations) and the wall clock, from the start of
learning, at which the share of ended episodes that ended by time-out first reaches a threshold
(0.8: the figure soaklab's tracking runs are judged by). That share is mjlab's
`Episode_Termination/time_out` count over the sum of its `Episode_Termination/*` counts, per
iteration.

mjlab is not a soaklab dependency: stage its wheels (scripts/gpu/README.md) and run

    python3 scripts/gpu/mjlab_ppo.py --num-envs 4096 --minutes 10 --out mjlab_ppo.json

mjlab's task registry imports wandb (for its own logger) at import time. The workplace's wheel
store cannot install wandb's dependencies, so an absent wandb is replaced by a module that fails
on any use; the runner logs to TensorBoard only.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import signal
import statistics
import sys
import time
import types
from dataclasses import asdict
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.host.info import git_state, host_record, versions

TIMEOUT_SHARE_TARGET = 0.8
TERMINATION_PREFIX = "Episode_Termination/"
WARMUP_ITERATIONS = 10  # start-up, kernel compilation and the first rollouts: not steady state
FINAL_WINDOW = 20  # iterations averaged for the final figures (one iteration's log is noisy)
# mjlab's own tracking figures, beside the time-out share: comparable with soaklab's
# Train/tracking/body_pos_error_m and episode length (mjlab's time limit is 10 s, 500 steps).
TRACKING_TAGS = {"body_error_m": "Metrics/motion/error_body_pos", "episode_length": "Train/mean_episode_length"}


MAX_ITERATIONS = 10**9  # learn() is ended by the wall-clock budget, not by a count


class _BudgetSpent(Exception):
    pass


class _AbsentWandb(types.ModuleType):
    """Stands where wandb is not installed: importing works, any use fails with its reason."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"wandb.{name}: wandb is not installed; this benchmark logs to TensorBoard only")


def stand_in_for_the_unused() -> None:
    """Makes mjlab importable on a headless machine without the parts only logging and video use."""
    try:
        import wandb  # noqa: F401
    except ImportError:
        sys.modules["wandb"] = _AbsentWandb("wandb")
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        # mjlab's import points mediapy at imageio-ffmpeg's bundled binary (45 MB, not staged); only
        # video recording runs it, which this benchmark never asks for.
        stand_in = types.ModuleType("imageio_ffmpeg")
        stand_in.get_ffmpeg_exe = lambda: "ffmpeg"  # type: ignore[attr-defined]
        sys.modules["imageio_ffmpeg"] = stand_in
    # mjlab asks mujoco for an EGL context at import; this benchmark renders nothing, and a headless
    # machine without libEGL then fails the import. mujoco makes no GL context when told so.
    os.environ.setdefault("MUJOCO_GL", "disable")


def import_mjlab() -> dict[str, Any]:
    """mjlab's parts, or InvalidInput naming what to stage."""
    stand_in_for_the_unused()
    try:
        from mjlab.envs import ManagerBasedRlEnv
        from mjlab.rl import MjlabOnPolicyRunner, RslRlVecEnvWrapper
        from mjlab.tasks.tracking.config.g1.env_cfgs import unitree_g1_flat_tracking_env_cfg
        from mjlab.tasks.tracking.config.g1.rl_cfg import unitree_g1_tracking_ppo_runner_cfg
    except ImportError as exc:
        raise InvalidInput(f"mjlab: cannot import it ({exc}); stage mjlab and its wheels as scripts/gpu/README.md "
                           "says") from exc
    return {"env": ManagerBasedRlEnv, "runner": MjlabOnPolicyRunner, "wrapper": RslRlVecEnvWrapper,
            "env_cfg": unitree_g1_flat_tracking_env_cfg, "agent_cfg": unitree_g1_tracking_ppo_runner_cfg}


def check_paths(motion: Path, out: Path) -> None:
    """The clip and the JSON's folder, before mjlab is imported."""
    if not motion.is_file():
        raise InvalidInput(f"--motion {motion}: no such clip file (run `soaklab assets pull`)")
    if not out.parent.is_dir():
        raise InvalidInput(f"--out {out}: its folder {out.parent} does not exist")


def tracking_env_cfg(parts: dict[str, Any], num_envs: int, seed: int, motion: Path) -> Any:
    """mjlab's G1 flat tracking env config on soaklab's clip, at `num_envs` envs and `seed`."""
    cfg = parts["env_cfg"]()
    cfg.scene.num_envs = num_envs
    cfg.seed = seed
    cfg.commands["motion"].motion_file = str(motion.resolve())
    return cfg


def timeout_shares(frame: Any) -> dict[int, float]:
    """Iteration -> the share of episodes ended by time-out among those ended in it."""
    terms = frame[frame["tag"].str.startswith(TERMINATION_PREFIX)]
    totals = terms.groupby("step")["value"].sum()
    timeouts = terms[terms["tag"] == f"{TERMINATION_PREFIX}time_out"].set_index("step")["value"]
    return {int(step): float(timeouts.get(step, 0.0) / total) for step, total in totals.items() if total > 0}


def read_log(log_dir: Path) -> Any:
    import pandas as pd
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rows = []
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            rows += [{"tag": tag, "step": e.step, "value": e.value, "wall_time": e.wall_time} for e in acc.Scalars(tag)]
    return pd.DataFrame(rows, columns=["tag", "step", "value", "wall_time"])


def summarise(frame: Any, started: float, num_envs: int, steps_per_env: int) -> dict[str, Any]:
    fps = frame[frame["tag"] == "Perf/total_fps"].sort_values("step")
    steady = fps[fps["step"] >= WARMUP_ITERATIONS]["value"].tolist()
    shares = timeout_shares(frame)
    wall = frame.groupby("step")["wall_time"].max()
    reached = next((step for step, share in sorted(shares.items()) if share >= TIMEOUT_SHARE_TARGET), None)
    tracking = {name: frame[frame["tag"] == tag].sort_values("step").set_index("step")["value"]
                for name, tag in TRACKING_TAGS.items()}

    def at(name: str, step: int) -> float | None:
        return float(tracking[name][step]) if step in tracking[name].index else None

    def final(name: str) -> float | None:
        tail = tracking[name].tail(FINAL_WINDOW)
        return float(tail.mean()) if len(tail) else None

    return {
        "iterations": int(fps["step"].max()) + 1 if len(fps) else 0,
        "env_steps_per_iteration": num_envs * steps_per_env,
        "steady_env_steps_per_s": statistics.median(steady) if steady else None,
        "timeout_share_target": TIMEOUT_SHARE_TARGET,
        "timeout_share_reached_at_iteration": reached,
        "timeout_share_reached_after_s": float(wall[reached] - started) if reached is not None else None,
        "timeout_share_reached_at_env_steps": (reached + 1) * num_envs * steps_per_env if reached is not None else None,
        "final_timeout_share": shares[max(shares)] if shares else None,
        **{f"final_{name}": final(name) for name in TRACKING_TAGS},
        "curve": [{"iteration": step, "timeout_share": share, "seconds": float(wall[step] - started),
                   **{name: at(name, step) for name in TRACKING_TAGS}}
                  for step, share in sorted(shares.items())],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-clock budget of learning")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--motion", type=Path, default=Path("resources/assets/g1/motions/largebox.npz"))
    parser.add_argument("--log-dir", type=Path, default=Path("results/mjlab-ppo"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.num_envs < 1:
            raise InvalidInput(f"--num-envs {args.num_envs}: must be >= 1")
        if not args.minutes > 0:
            raise InvalidInput(f"--minutes {args.minutes}: must be > 0")
        check_paths(args.motion, args.out)
        # The summary reads every event file in the log dir: an earlier run's would mix in.
        if any(args.log_dir.glob("events.out.tfevents.*")):
            raise InvalidInput(f"--log-dir {args.log_dir}: already holds a run's event files; name an empty folder")
        parts = import_mjlab()
    except InvalidInput as exc:
        print(f"mjlab_ppo: error: {exc}", file=sys.stderr)
        return 2

    cfg = tracking_env_cfg(parts, args.num_envs, args.seed, args.motion)
    agent = parts["agent_cfg"]()
    agent.seed = args.seed
    agent_cfg = asdict(agent)
    agent_cfg["logger"] = "tensorboard"
    args.log_dir.mkdir(parents=True, exist_ok=True)
    env = parts["wrapper"](parts["env"](cfg=cfg, device=args.device), clip_actions=agent.clip_actions)
    runner = parts["runner"](env, agent_cfg, str(args.log_dir), args.device)
    started = time.time()
    log = runner.logger.log
    stop_asked: list[int] = []
    # A SIGTERM (a device call's `timeout`, a cancelled visit) ends learning after the iteration
    # in flight, like the budget does, so the iterations already run are summarised, not lost.
    signal.signal(signal.SIGTERM, lambda signum, _frame: stop_asked.append(signum))

    def log_then_check_the_clock(**kwargs: Any) -> None:
        # rsl-rl's learn() runs a fixed count; the budget is wall clock, checked after each
        # iteration's own log line, so every logged iteration is whole.
        log(**kwargs)
        if stop_asked or time.time() - started >= args.minutes * 60:
            raise _BudgetSpent()

    runner.logger.log = log_then_check_the_clock
    try:
        runner.learn(num_learning_iterations=MAX_ITERATIONS, init_at_random_ep_len=True)
    except _BudgetSpent:
        pass
    finally:
        runner.logger.log = log
    print(f"mjlab_ppo: {runner.current_learning_iteration + 1} iterations in {time.time() - started:.0f} s"
          + (" (stopped by SIGTERM)" if stop_asked else ""), flush=True)
    env.close()

    record = {
        "kind": "mjlab_ppo", "command": " ".join(["python3 scripts/gpu/mjlab_ppo.py", *(argv or sys.argv[1:])]),
        "host": host_record(), "versions": {**versions(), **{name: _version(name) for name in ("mjlab", "rsl-rl-lib")}},
        "git": git_state(),
        "stopped_by_signal": bool(stop_asked),
        "settings": {"device": args.device, "num_envs": args.num_envs, "minutes": args.minutes, "seed": args.seed,
                     "motion": str(args.motion), "task": "mjlab unitree_g1_flat_tracking_env_cfg",
                     "agent": "mjlab unitree_g1_tracking_ppo_runner_cfg (rsl-rl PPO)"},
        "results": summarise(read_log(args.log_dir), started, args.num_envs, agent.num_steps_per_env),
    }
    write_json_atomic(args.out, record)
    r = record["results"]
    print(f"mjlab_ppo: steady {r['steady_env_steps_per_s']} env-steps/s; time-out share >= {TIMEOUT_SHARE_TARGET} "
          f"after {r['timeout_share_reached_after_s']} s; wrote {args.out}")
    return 0


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
