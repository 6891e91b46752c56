#!/usr/bin/env python3
"""The motion library's env step on the GPU: one clip, the library as one env per clip (blocks,
stepped one after the other) and as one world set, each timed by phase with CUDA events after
warm-up (issue 68).

Phases per control step, medians over `--iters` steps: `step` (the whole env step as the collector
calls it), and in a second run of steps its parts, `physics` (the backends' captured step: one
launch for one clip or the world set, one per clip for the blocks) and `task` (everything after the
physics: terms, resets, observations: `evaluate`). Random actions of a trained policy's scale, so
episodes end and reset inside the window.

    python3 scripts/gpu/library_world.py --envs 1024,4096 --out library_world.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

LAYOUTS = ("one_clip", "blocks", "world_set")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default="1024,4096")
    parser.add_argument("--clips", default="largebox,crawl_slope", help="the library's clips (the first is one_clip's)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--assets", type=Path, default=Path("/root/library-world/assets"))
    parser.add_argument("--no-compile", action="store_true", help="the task's terms eager (faster to build)")
    parser.add_argument("--deterministic", action="store_true",
                        help="training.deterministic's settings (soaklab.host.determinism.enter) before the "
                             "envs are built: the mode's physics and task parts, apart (issue 67's cost)")
    parser.add_argument("--sim", default="mjwarp", help="mujoco with --device cpu: a smoke run off the GPU")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import torch

    if args.deterministic:  # as a run's processes do, before their first kernel (the backend reads it)
        from soaklab.host import determinism

        determinism.enter(0)
    from soaklab.assets.pull import PullRequest, pull_assets
    from soaklab.assets.record import assets_record, resolved_motion, scene_for_env
    from soaklab.bench.timing import time_ms
    from soaklab.config.compose import compose
    from soaklab.tasks.env import EnvSpec
    from soaklab.tasks.g1_tracking.library import build, build_blocks

    cache = Path("resources/assets/cache")
    model_wheel, clip_wheel = next(cache.glob("mjlab-*.whl")), next(cache.glob("holosoma-*.whl"), None)
    if clip_wheel is None:
        print("library_world: no holosoma wheel in resources/assets/cache (carry it: scripts/gpu/README.md)",
              file=sys.stderr)
        return 2
    manifest = args.assets / "manifest.json"
    pull_assets(PullRequest(robot="g1", source=str(model_wheel), motion=None, dest=args.assets / "resources",
                            manifest=manifest, clip_wheel=clip_wheel))
    record = assets_record(manifest)
    clips = args.clips.split(",")
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    result: dict = {"device": name, "sim": args.sim, "deterministic": args.deterministic, "clips": clips,
                    "warmup": args.warmup,
                    "iters": args.iters, "runs": []}
    for n in [int(v) for v in args.envs.split(",")]:
        for layout in args.layouts.split(","):
            motion = resolved_motion(record, clips[0] if layout == "one_clip" else clips)
            run = compose("flashsac", "g1_motion_tracking", args.sim,
                          [f"algo.num_envs={n}", f"env.motion={json.dumps(motion)}",
                           f"training.deterministic={str(args.deterministic).lower()}"]).run
            builder = build_blocks if layout == "blocks" else build
            env = builder(run, EnvSpec.of(run, str(device)), scene_for_env(record, motion),
                          compile_terms=device.type == "cuda" and not args.no_compile)
            try:
                result["runs"].append({"envs": n, "layout": layout, **phases(env, n, args, time_ms, device)})
            finally:
                env.close()
            print(json.dumps(result["runs"][-1]), flush=True)
    base = {(r["envs"], r["layout"]): r["step_ms"] for r in result["runs"]}
    for r in result["runs"]:
        one = base.get((r["envs"], "one_clip"))
        r["rate_vs_one_clip"] = one / r["step_ms"] if one else None
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def phases(env, n: int, args, time_ms, device) -> dict:
    """Medians of the whole step (as the collector calls it), and of its physics and task parts
    timed in one sequence of steps (so the physics steps the states training steps, resets included)."""
    import time

    import torch

    generator = torch.Generator(device=device).manual_seed(0)
    actions = [torch.rand(n, 29, generator=generator, device=device) * 0.6 - 0.3 for _ in range(8)]
    envs = getattr(env, "envs", [env])  # blocks: one env per clip, each with its own backend
    offsets = [0]
    for e in envs:
        offsets.append(offsets[-1] + e.num_envs)
    env.reset()
    for i in range(args.warmup):  # lazy allocations, compilation, the task steps' capture
        env.step(actions[i % 8])
    count = iter(range(10**9))

    def step() -> None:
        env.step(actions[next(count) % 8])

    out = {"step_ms": statistics.median(time_ms(step, args.iters, device))}
    cuda = device.type == "cuda"

    def mark() -> object:  # a CUDA event on the GPU's clock, else the host's
        if not cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def ms(a: object, b: object) -> float:
        return a.elapsed_time(b) if cuda else (b - a) * 1e3

    marks = []
    for i in range(args.iters):
        a = actions[i % 8]
        begin = mark()
        for e, lo, hi in zip(envs, offsets[:-1], offsets[1:], strict=True):
            e.apply_action(a[lo:hi])
            e.backend.step()
        middle = mark()
        for e, lo, hi in zip(envs, offsets[:-1], offsets[1:], strict=True):
            e.evaluate(a[lo:hi])
        marks.append((begin, middle, mark()))
    if cuda:
        torch.cuda.synchronize()
    split = [(ms(b, m), ms(m, e)) for b, m, e in marks]
    out["physics_ms"] = statistics.median(p for p, _ in split)
    out["task_ms"] = statistics.median(t for _, t in split)
    out["env_steps_per_s"] = n / out["step_ms"] * 1e3
    out["physics_launches"] = len(envs)
    return out


if __name__ == "__main__":
    sys.exit(main())
