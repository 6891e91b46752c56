"""The `soaklab` command line (DESIGN §3).

Exit 0 = success; 2 = invalid input or configuration (nothing spawned or
written); 1 = runtime failure. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from soaklab.errors import SoaklabError


def _run_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", required=True, help="sac | flashsac")
    parser.add_argument("--task", required=True, help="e.g. g1_motion_tracking")
    parser.add_argument("--sim", required=True, help="mujoco | mjwarp")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides (YAML scalars)")


def cmd_assets_pull(args: argparse.Namespace) -> int:
    from soaklab.assets.pull import PullRequest, pull_assets

    pull_assets(PullRequest(robot=args.robot, source=args.source, motion=args.motion, dest=args.dest,
                            manifest=args.manifest, repair=args.repair))
    return 0


def cmd_config_resolve(args: argparse.Namespace) -> int:
    from soaklab.config.compose import compose
    from soaklab.config.run_config import resolve_run_config, write_run_config
    from soaklab.settings.devices import allow_cpu_carrier_from_env, probe_host

    composed = compose(args.algo, args.task, args.sim, args.overrides)
    resolved = resolve_run_config(composed, probe_host(), allow_cpu_carrier_from_env(), args.assets_manifest)
    if args.mps_record is not None:
        from soaklab.mps.record import check_mps_record, read_mps_record

        check_mps_record(read_mps_record(args.mps_record), resolved.settings.cuda_process_sharing, args.mps_record)
    record = write_run_config(resolved, args.out)
    print(resolved.devices.mapping_line())
    budget = resolved.budget
    print(
        f"config: {composed.algo}/{composed.task}/{composed.sim} num_envs={resolved.settings.num_envs} "
        f"slot_rows={resolved.settings.replay_ingress_slot_rows} tensor budget "
        f"{budget.total_bytes / (1 << 20):.0f} MiB; {record['config_hash'][:19]}... -> {args.out}"
    )
    return 0


def cmd_mps_ensure(args: argparse.Namespace) -> int:
    import yaml

    from soaklab.mps.record import ensure_mps

    try:
        sharing = yaml.safe_load(args.cuda_process_sharing)
    except yaml.YAMLError:
        sharing = args.cuda_process_sharing
    ensure_mps(sharing, args.out)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from soaklab.rl.train import resolve_training, train

    resolved = resolve_training(args.run_config, args.algo, args.task, args.sim, args.overrides,
                                args.assets_manifest)
    run_dir, summary = train(resolved)
    shutdown = summary["runtime_manifest"]["shutdown"]
    print(f"train: {summary['status']} ({shutdown['classification']}) after {summary['completed_iterations']} "
          f"iterations, {summary['total_env_steps']} env steps; {run_dir}/run_summary.json")
    if shutdown["cleanup"]["errors"]:
        print(f"train: cleanup errors: {shutdown['cleanup']['errors'][0]}", file=sys.stderr)
    return 0 if summary["status"] == "completed" and not shutdown["cleanup"]["errors"] else 1


def cmd_bench_backend(args: argparse.Namespace) -> int:
    from soaklab.bench.backend import ProbeSettings, run_probe
    from soaklab.config.run_config import assets_record

    assets = assets_record(args.assets_manifest)
    assert assets is not None
    settings = ProbeSettings(num_envs=args.num_envs, warmup=args.warmup, iters=args.iters, threads=args.threads,
                             seed=args.seed, torch_threads=args.torch_threads, scene=Path(assets["scene"]),
                             motion=Path(assets["motion"]))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    run_probe(backends, settings, args.output, args.argv)
    print(f"bench: wrote {args.output}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="soaklab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    assets = sub.add_parser("assets", help="robot model and motion clip").add_subparsers(dest="action", required=True)
    pull = assets.add_parser("pull", help="materialize the G1 scene and motion clip, write the manifest")
    pull.add_argument("--robot", default="g1")
    pull.add_argument("--source", help="local wheel or folder instead of the pinned wheel (air-gapped hosts)")
    pull.add_argument("--motion", type=Path, help="a real motion clip NPZ instead of the synthetic one")
    pull.add_argument("--dest", type=Path, default=Path("resources/assets"))
    pull.add_argument("--manifest", type=Path, default=Path("results/assets/manifest.json"))
    pull.add_argument("--repair", action="store_true", help="rebuild files that fail verification")
    pull.set_defaults(func=cmd_assets_pull)

    config = sub.add_parser("config", help="owner config composition").add_subparsers(dest="action", required=True)
    resolve = config.add_parser("resolve", help="compose, check and write run_config.json")
    _run_selection(resolve)
    resolve.add_argument("--out", type=Path, required=True)
    resolve.add_argument("--assets-manifest", type=Path, help="record the scene/motion of this asset manifest")
    resolve.add_argument("--mps-record", type=Path, help="the mps_start record this run must agree with")
    resolve.set_defaults(func=cmd_config_resolve)

    mps = sub.add_parser("mps", help="CUDA MPS lifecycle").add_subparsers(dest="action", required=True)
    ensure = mps.add_parser("ensure", help="write the run's MPS record (the mps_start rule)")
    ensure.add_argument("--cuda-process-sharing", default="null", help="the run's training.cuda_process_sharing")
    ensure.add_argument("--out", type=Path, required=True)
    ensure.set_defaults(func=cmd_mps_ensure)

    train = sub.add_parser("train", help="run the learner and its collector")
    train.add_argument("--run-config", type=Path, help="a run_config.json from `soaklab config resolve`")
    train.add_argument("--algo")
    train.add_argument("--task")
    train.add_argument("--sim")
    train.add_argument("--assets-manifest", type=Path, help="default: the run config's, or results/assets/")
    train.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    train.set_defaults(func=cmd_train)

    bench = sub.add_parser("bench", help="benchmarks writing JSON").add_subparsers(dest="action", required=True)
    probe = bench.add_parser("backend", help="phase-local env probe with the raw physics ceiling")
    probe.add_argument("--backends", default="mujoco", help="comma list: mujoco,mjwarp")
    probe.add_argument("--num-envs", type=int, required=True)
    probe.add_argument("--warmup", type=int, default=20)
    probe.add_argument("--iters", type=int, default=100)
    probe.add_argument("--threads", type=int, help="physics threads (default: all cores)")
    probe.add_argument("--seed", type=int, default=1)
    probe.add_argument("--torch-threads", type=int, default=1,
                       help="torch intra-op threads (default 1: the physics threads own the cores)")
    probe.add_argument("--assets-manifest", type=Path, default=Path("results/assets/manifest.json"))
    probe.add_argument("--output", type=Path, required=True)
    probe.set_defaults(func=cmd_bench_backend)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv  # the exact command, recorded by benchmarks
    try:
        return int(args.func(args))
    except SoaklabError as exc:
        print(f"soaklab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("soaklab: interrupted", file=sys.stderr)
        return 130
