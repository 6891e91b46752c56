"""mjlab's own G1 tracking env stepped alone on the same clip: issue 49's side-by-side of the env step.

No learner: mjlab's `ManagerBasedRlEnv` (its `unitree_g1_flat_tracking_env_cfg`, the env its PPO
trains) is reset, warmed up, then stepped with uniform random actions in [-1, 1]; each `env.step` is
timed between two CUDA events (medians), as `soaklab bench backend` times soaklab's env step. The
JSON has the command, machine, versions, commit and the medians. Stage mjlab as
scripts/gpu/README.md says, then run it beside soaklab's probe in the same visit:

    python3 benchmarks/visits/2026-12-06-levers/mjlab_env.py --num-envs 4096 --out mjlab_env_4096.json
    python3 -m soaklab bench backend --backends mjwarp --num-envs 4096 --output backend_4096.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.host.info import git_state, host_record, versions

# mjlab's PPO driver lives in scripts/gpu/ (stage_mjlab.sh stages its wheels); this one-off reads its helpers.
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "gpu"))
from mjlab_ppo import _version, check_paths, import_mjlab, tracking_env_cfg  # noqa: E402


def step_times(env: Any, num_envs: int, num_actions: int, warmup: int, iters: int, seed: int) -> list[float]:
    """Milliseconds of each timed `env.step`, on the GPU's clock, after `warmup` untimed steps."""
    import torch

    generator = torch.Generator(device=env.device).manual_seed(seed)
    actions = [torch.rand(num_envs, num_actions, generator=generator, device=env.device) * 2 - 1
               for _ in range(warmup + iters)]  # drawn before timing: the step alone is timed
    with torch.no_grad():
        env.reset()
        for a in actions[:warmup]:
            env.step(a)
        torch.cuda.synchronize()
        marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for a, (begin, end) in zip(actions[warmup:], marks, strict=True):
            begin.record()
            env.step(a)
            end.record()
        torch.cuda.synchronize()
    return [begin.elapsed_time(end) for begin, end in marks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--warmup", type=int, default=50, help="untimed steps first (graph capture, compiles)")
    parser.add_argument("--iters", type=int, default=200, help="timed steps")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--motion", type=Path, default=Path("resources/assets/g1/motions/largebox.npz"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        for flag, value, least in (("--num-envs", args.num_envs, 1), ("--warmup", args.warmup, 1),
                                   ("--iters", args.iters, 2)):  # two at least: the p90 needs a spread
            if value < least:
                raise InvalidInput(f"{flag} {value}: must be >= {least}")
        check_paths(args.motion, args.out)
        parts = import_mjlab()
    except InvalidInput as exc:
        print(f"mjlab_env: error: {exc}", file=sys.stderr)
        return 2

    cfg = tracking_env_cfg(parts, args.num_envs, args.seed, args.motion)
    env = parts["env"](cfg=cfg, device=args.device)
    num_actions = int(env.action_manager.total_action_dim)
    times = step_times(env, args.num_envs, num_actions, args.warmup, args.iters, args.seed)
    decimation = int(cfg.decimation)
    env.close()
    step_ms = statistics.median(times)
    record = {
        "kind": "mjlab_env", "command": " ".join(["python3 benchmarks/visits/2026-12-06-levers/mjlab_env.py",
                                             *(argv or sys.argv[1:])]),
        "host": host_record(), "versions": {**versions(), "mjlab": _version("mjlab")}, "git": git_state(),
        "settings": {"device": args.device, "num_envs": args.num_envs, "warmup": args.warmup, "iters": args.iters,
                     "seed": args.seed, "motion": str(args.motion), "actions": "uniform in [-1, 1]",
                     "task": "mjlab unitree_g1_flat_tracking_env_cfg", "decimation": decimation},
        "results": {"env_step_ms_median": step_ms, "env_step_ms_p90": statistics.quantiles(times, n=10)[-1],
                    "env_steps_per_s": args.num_envs / (step_ms / 1e3), "num_actions": num_actions},
    }
    write_json_atomic(args.out, record)
    print(f"mjlab_env: {args.num_envs} envs, env step {step_ms:.2f} ms median "
          f"({record['results']['env_steps_per_s'] / 1e3:.1f} k env-steps/s); wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
