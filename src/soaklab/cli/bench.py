"""`soaklab bench backend|learner`: the benchmarks behind `soaklab bench`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from soaklab.catalogue import ALGORITHMS, choices
from soaklab.errors import InvalidInput


def _solver_caps(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(c) for c in text.split(",") if c.strip())
    except ValueError:
        raise InvalidInput(f"--solver-caps {text}: a comma list of whole iteration counts, e.g. 10,25") from None


def cmd_bench_backend(args: argparse.Namespace) -> int:
    from soaklab.assets.record import assets_record
    from soaklab.bench.backend import ProbeSettings, parse_physics_variants, run_probe

    assets = assets_record(args.assets_manifest)
    assert assets is not None
    settings = ProbeSettings(num_envs=args.num_envs, warmup=args.warmup, iters=args.iters, threads=args.threads,
                             seed=args.seed, torch_threads=args.torch_threads, scene=Path(assets["scene"]),
                             motion=Path(assets["motion"]), solver_caps=_solver_caps(args.solver_caps),
                             physics_variants=parse_physics_variants(args.physics_variants))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    run_probe(backends, settings, args.output, args.argv)
    print(f"bench: wrote {args.output}")
    return 0


def cmd_bench_learner(args: argparse.Namespace) -> int:
    from soaklab.bench.learner import run_learner_bench
    from soaklab.config.keys import COMPILE_MODES

    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    bad = [a for a in algos if a not in ALGORITHMS]
    if not algos or bad:
        raise InvalidInput(f"--algos {args.algos}: expected a comma list of {choices(ALGORITHMS)}")
    try:
        batches = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    except ValueError:
        batches = []
    if not batches or min(batches) < 1:
        raise InvalidInput(f"--batch-sizes {args.batch_sizes}: expected a comma list of integers >= 1")
    for flag, value, low in (("--iters", args.iters, 1), ("--warmup", args.warmup, 0),
                             ("--num-envs", args.num_envs, 1), ("--replay-rows", args.replay_rows, 1)):
        if value < low:
            raise InvalidInput(f"{flag}={value}: expected an integer >= {low}")
    scopes = tuple(c.strip() for c in args.compile.split(",") if c.strip())
    if not scopes or any(c not in COMPILE_MODES for c in scopes):
        raise InvalidInput(f"--compile {args.compile}: expected a comma list of {', '.join(COMPILE_MODES)}")
    run_learner_bench(algos, batches, args.device, args.num_envs, args.warmup, args.iters, args.replay_rows,
                      args.output, args.argv, scopes)
    print(f"bench: wrote {args.output}")
    return 0


def add_bench_commands(sub: Any) -> None:
    """Bench: the benchmarks behind `soaklab bench`."""
    bench = sub.add_parser("bench", help="benchmarks writing JSON").add_subparsers(dest="action", required=True,
                                                                                  metavar="ACTION")
    probe = bench.add_parser("backend", help="phase-local env probe with the raw physics ceiling")
    probe.add_argument("--backends", default="mujoco", help="comma list: mujoco,mjwarp")
    probe.add_argument("--num-envs", type=int, required=True, help="envs per step")
    probe.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    probe.add_argument("--iters", type=int, default=100, help="timed steps")
    probe.add_argument("--threads", type=int, help="physics threads (all cores when not given)")
    probe.add_argument("--seed", type=int, default=1, help="env seed")
    probe.add_argument("--torch-threads", type=int, default=1,
                       help="torch intra-op threads (1: the physics threads own the cores)")
    probe.add_argument("--solver-caps", default="",
                       help="comma list: MJWarp's raw ceiling again with the solver's iteration limit lowered to each")
    probe.add_argument("--physics-variants", default="",
                       help="MJWarp's raw ceiling again under each ;-separated group of mujoco_warp Option "
                            "overrides, e.g. 'opt.solver=CG;opt.broadphase=SAP_TILE,opt.ls_iterations=10'")
    probe.add_argument("--assets-manifest", type=Path, default=Path("results/assets/manifest.json"),
                       help="where the scene and clip are")
    probe.add_argument("--output", type=Path, required=True, help="the benchmark JSON")
    probe.set_defaults(func=cmd_bench_backend)
    learner = bench.add_parser("learner", help="one learner update and inference, eager against captured")
    learner.add_argument("--algos", default="flashsac,sac", help="comma list: flashsac,sac")
    learner.add_argument("--batch-sizes", default="2048,8192", help="comma list of batch sizes")
    learner.add_argument("--device", default="cuda", help="the learner's torch device (cpu runs eager only)")
    learner.add_argument("--num-envs", type=int, default=1024, help="observations per timed inference")
    learner.add_argument("--warmup", type=int, default=20, help="untimed calls first")
    learner.add_argument("--iters", type=int, default=200, help="timed calls")
    learner.add_argument("--replay-rows", type=int, default=100_000, help="rows in the replay the updates sample")
    learner.add_argument("--compile", default="eager",
                         help="comma list of algo.compile scopes to time (eager, nets, update, auto)")
    learner.add_argument("--output", type=Path, required=True, help="the benchmark JSON")
    learner.set_defaults(func=cmd_bench_learner)
