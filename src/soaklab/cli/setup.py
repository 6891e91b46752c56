"""`soaklab assets`, `config` and `mps`: what a run needs before it starts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from soaklab.cli.args import override_arguments, owner_arguments
from soaklab.errors import InvalidInput


def cmd_assets_pull(args: argparse.Namespace) -> int:
    from soaklab.assets.pull import PullRequest, pull_assets

    pull_assets(PullRequest(robot=args.robot, source=args.source, motion=args.motion, dest=args.dest,
                            manifest=args.manifest, repair=args.repair, clip=args.clip, clip_wheel=args.clip_wheel))
    return 0


def cmd_config_resolve(args: argparse.Namespace) -> int:
    from soaklab.config.host import probe_host
    from soaklab.config.resolve import RunRequest, resolve
    from soaklab.config.run_config import write_run_config

    resolved = resolve(RunRequest(args.algo, args.task, args.sim, tuple(args.overrides), args.assets_manifest),
                       probe_host())
    record = write_run_config(resolved, args.out)
    print(f"config: {resolved.origin}")
    print(resolved.devices.mapping_line())
    budget, c = resolved.budget, resolved.composed
    print(
        f"config: {c.algo}/{c.task}/{c.sim} num_envs={resolved.run.algo.num_envs} "
        f"slot_rows={resolved.settings.replay_ingress_slot_rows} tensor budget "
        f"{budget.total_bytes / (1 << 20):.0f} MiB; {record['config_hash'][:19]}... -> {args.out}"
    )
    return 0


def cmd_mps_ensure(args: argparse.Namespace) -> int:
    import yaml

    from soaklab.mps.record import ensure_mps

    if args.run_config is not None:
        from soaklab.config.resolve import read_run_config

        if args.cuda_process_sharing is not None:
            raise InvalidInput("--run-config: takes training.cuda_process_sharing from the file; "
                               "drop --cuda-process-sharing")
        from soaklab.config.run_config import recorded_run

        sharing = recorded_run(args.run_config, read_run_config(args.run_config)).training.cuda_process_sharing
    else:
        try:
            sharing = yaml.safe_load(args.cuda_process_sharing or "null")
        except yaml.YAMLError:
            sharing = args.cuda_process_sharing
    ensure_mps(sharing, args.out)
    return 0


def cmd_mps_start(args: argparse.Namespace) -> int:
    from soaklab.mps.daemon import StartRequest, start

    record = start(StartRequest(args.gpus, args.name, args.pipe_dir, args.log_dir))
    print(f"mps: trainers with training.cuda_process_sharing=mps select it; for other clients: "
          f"eval \"$(soaklab mps env --name {record.name})\"")
    return 0


def cmd_mps_stop(args: argparse.Namespace) -> int:
    from soaklab.mps.daemon import stop

    stop(args.name)
    return 0


def cmd_mps_status(args: argparse.Namespace) -> int:
    from soaklab.mps.daemon import status_lines

    print("\n".join(status_lines()))
    return 0


def cmd_mps_env(args: argparse.Namespace) -> int:
    from soaklab.mps.daemon import env_lines

    print("\n".join(env_lines(args.name)))
    return 0


def cmd_mps_doctor(args: argparse.Namespace) -> int:
    from soaklab.mps.daemon import doctor_checks

    checks = doctor_checks(args.gpus)
    for ok, line in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {line}")
    return 0 if all(ok for ok, _ in checks) else 1


def add_setup_commands(sub: Any) -> None:
    """Assets, config and mps: what a run needs before it starts."""
    from soaklab.assets.clips import CLIP_CHOICES, DEFAULT_CLIP, SYNTHETIC

    assets = sub.add_parser("assets", help="robot model and motion clip").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    pull = assets.add_parser("pull", help="materialize the G1 scene and motion clip, write the manifest")
    pull.add_argument("--robot", default="g1", choices=["g1"], help="the robot")
    pull.add_argument("--source", help="local wheel or folder instead of the pinned wheel (air-gapped hosts)")
    pull.add_argument("--clip", default=DEFAULT_CLIP, choices=CLIP_CHOICES,
                      help=f"the default reference clip ({SYNTHETIC} needs no download)")
    pull.add_argument("--clip-wheel", type=Path, help="a local copy of the clip's pinned wheel (air-gapped hosts)")
    pull.add_argument("--motion", type=Path, help="your own clip NPZ (task layout) as the default reference")
    pull.add_argument("--dest", type=Path, default=Path("resources/assets"), help="where the asset tree goes")
    pull.add_argument("--manifest", type=Path, default=Path("results/assets/manifest.json"),
                      help="the manifest to write")
    pull.add_argument("--repair", action="store_true", help="rebuild files that fail verification")
    pull.set_defaults(func=cmd_assets_pull)

    config = sub.add_parser("config", help="owner config composition").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    resolve = config.add_parser("resolve", help="compose, check and write run_config.json")
    owner_arguments(resolve, required=True)
    override_arguments(resolve)
    resolve.add_argument("--out", type=Path, required=True, help="the run_config.json to write")
    resolve.add_argument("--assets-manifest", type=Path,
                         help="record the scene/motion of this asset manifest (default: results/assets/ for G1)")
    resolve.set_defaults(func=cmd_config_resolve)

    mps = sub.add_parser("mps", help="CUDA MPS lifecycle").add_subparsers(dest="action", required=True,
                                                                          metavar="ACTION")
    ensure = mps.add_parser("ensure", help="write the run's MPS record (the mps_start rule)")
    ensure.add_argument("--run-config", type=Path, help="the resolved run whose training.cuda_process_sharing decides")
    ensure.add_argument("--cuda-process-sharing", help="null or mps, without a run config (null when not given)")
    ensure.add_argument("--out", type=Path, required=True, help="the record to write")
    ensure.set_defaults(func=cmd_mps_ensure)
    start = mps.add_parser("start", help="start a user-owned MPS control daemon for one GPU and record it")
    start.add_argument("--gpus", help="visible index or GPU UUID (required when several GPUs are visible)")
    start.add_argument("--name", help="daemon name (gpu-<uuid> when not given)")
    start.add_argument("--pipe-dir", type=Path, help="absolute pipe dir (/tmp/soaklab-mps/<name>/pipe when not given)")
    start.add_argument("--log-dir", type=Path, help="absolute log dir (/tmp/soaklab-mps/<name>/log when not given)")
    start.set_defaults(func=cmd_mps_start)
    stop = mps.add_parser("stop", help="quit a daemon soaklab started (the single live one by default); logs stay")
    stop.add_argument("--name", help="the daemon to stop (the single live one when not given)")
    stop.set_defaults(func=cmd_mps_stop)
    status = mps.add_parser("status", help="read-only: recorded daemons, their state, the topology modes")
    status.set_defaults(func=cmd_mps_status)
    env = mps.add_parser("env", help="print the CUDA_MPS_* exports of a live daemon for other clients")
    env.add_argument("--name", help="the daemon (the single live one when not given)")
    env.set_defaults(func=cmd_mps_env)
    doctor = mps.add_parser("doctor", help="read-only checks: binaries, GPU selection, compute mode, daemons")
    doctor.add_argument("--gpus", help="visible index, GPU UUID or all")
    doctor.set_defaults(func=cmd_mps_doctor)
