"""A motion library's env step against the one-clip step, and each of its blocks alone (issue 49).

Builds, from one asset manifest and the same seed, four G1 tracking envs:
- `library`: `env.motion=[largebox,crawl_slope]` at `--num-envs` (a block of half the envs per clip,
  crawl_slope's on its terrain), the env `gpu-learning`'s library runs step;
- `one_clip`: largebox at `--num-envs`, the env of the throughput records;
- `largebox_block` and `crawl_slope_block`: each clip alone at half the envs, so the library's cost
  splits into its blocks (crawl_slope's ramp and platform are mesh geoms: the suspect).
Each is reset, warmed up, then stepped with uniform random actions in [-1, 1]; each step is timed
(CUDA events on the GPU, the wall clock on the CPU) with the task terms compiled as in a run.

From the repository root:

    python3 benchmarks/visits/2026-12-03-h200-library-streams/library_step.py --num-envs 1024 \\
        --out library_step_1024.json
    python3 benchmarks/visits/2026-12-03-h200-library-streams/library_step.py --sim mujoco --num-envs 8 \\
        --iters 4 --out cpu.json   # CPU
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

CLIPS = ("largebox", "crawl_slope")
SIMS = {"mjwarp": "cuda", "mujoco": "cpu"}  # where each backend's env is stepped here


def envs_to_time(num_envs: int) -> dict[str, tuple[str, int]]:
    """Name -> (env.motion, env count) of each env the benchmark steps."""
    half = num_envs // 2
    return {"library": (f"[{','.join(CLIPS)}]", num_envs), "one_clip": (CLIPS[0], num_envs),
            f"{CLIPS[0]}_block": (CLIPS[0], half), f"{CLIPS[1]}_block": (CLIPS[1], half)}


def build(sim: str, motion: str, num_envs: int, seed: int, manifest: Path) -> Any:
    from soaklab.config.host import probe_host
    from soaklab.config.resolve import RunRequest, resolve
    from soaklab.tasks.env import EnvSpec
    from soaklab.tasks.registry import make_env

    overrides = (f"algo.num_envs={num_envs}", f"env.motion={motion}", f"env.seed={seed}")
    resolved = resolve(RunRequest("flashsac", "g1_motion_tracking", sim, overrides, manifest), probe_host())
    return make_env(resolved.run, EnvSpec.of(resolved.run, SIMS[sim]), resolved.scene)


def step_ms(env: Any, warmup: int, iters: int, seed: int) -> list[float]:
    """Milliseconds of each timed step after `warmup` untimed ones; the actions are drawn first."""
    import torch

    from soaklab.bench.timing import time_ms

    device = torch.device(env.device)
    generator = torch.Generator(device=device).manual_seed(seed)
    actions = iter([torch.rand(env.num_envs, env.spaces.action, generator=generator, device=device) * 2 - 1
                    for _ in range(warmup + iters)])
    with torch.no_grad():
        env.reset()
        time_ms(lambda: env.step(next(actions)), warmup, device)
        return time_ms(lambda: env.step(next(actions)), iters, device)


def check(args: argparse.Namespace) -> None:
    """Every refusal before anything is built: one line naming the flag and its range."""
    if args.num_envs < 2 or args.num_envs % 2:
        raise InvalidInput(f"--num-envs {args.num_envs}: must be an even number >= 2 (half the envs per clip)")
    for flag, value, least in (("--warmup", args.warmup, 1), ("--iters", args.iters, 2)):
        if value < least:
            raise InvalidInput(f"{flag} {value}: must be >= {least}")
    if not args.assets_manifest.is_file():
        raise InvalidInput(f"--assets-manifest {args.assets_manifest}: no such file; run `soaklab assets pull` first")
    if args.out.exists() and not args.out.is_file():
        raise InvalidInput(f"--out {args.out}: exists and is not a file")
    if SIMS[args.sim] == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InvalidInput(f"--sim {args.sim}: needs an NVIDIA GPU (CUDA); --sim mujoco times the CPU backend")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", choices=sorted(SIMS), default="mjwarp")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first (graph capture, compiles)")
    parser.add_argument("--iters", type=int, default=100, help="timed steps")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--assets-manifest", type=Path, default=Path("results/assets/manifest.json"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        check(args)
    except InvalidInput as exc:
        print(f"library_step: error: {exc}", file=sys.stderr)
        return 2

    results: dict[str, dict[str, Any]] = {}
    for name, (motion, count) in envs_to_time(args.num_envs).items():
        env = build(args.sim, motion, count, args.seed, args.assets_manifest)
        try:
            times = step_ms(env, args.warmup, args.iters, args.seed)
        finally:
            env.close()
        median = statistics.median(times)
        results[name] = {"motion": motion, "num_envs": count, "step_ms_median": median,
                         "step_ms_p90": statistics.quantiles(times, n=10)[-1],
                         "env_steps_per_s": count / (median / 1e3)}
        print(f"library_step: {name} ({count} envs): {median:.2f} ms per step, "
              f"{results[name]['env_steps_per_s'] / 1e3:.1f} k env-steps/s", flush=True)
    blocks = [results[f"{clip}_block"]["step_ms_median"] for clip in CLIPS]
    record = {
        "kind": "library_step",
        "command": " ".join(["python3 benchmarks/visits/2026-12-03-h200-library-streams/library_step.py",
                             *(argv or sys.argv[1:])]),
        "host": host_record(), "versions": versions(), "git": git_state(),
        "settings": {"sim": args.sim, "device": SIMS[args.sim], "num_envs": args.num_envs, "clips": list(CLIPS),
                     "warmup": args.warmup, "iters": args.iters, "seed": args.seed, "actions": "uniform in [-1, 1]"},
        "results": results,
        # The figure: the library's env-steps/s over the one-clip env's at the same count.
        "library_over_one_clip": results["library"]["env_steps_per_s"] / results["one_clip"]["env_steps_per_s"],
        "blocks_alone_ms": dict(zip(CLIPS, blocks, strict=True)),
        "library_over_blocks_alone": results["library"]["step_ms_median"] / sum(blocks),
    }
    write_json_atomic(args.out, record)
    print(f"library_step: the library at {record['library_over_one_clip']:.1%} of the one-clip rate; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
