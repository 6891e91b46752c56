"""`soaklab train` and `soaklab soak`: a run, alone or under the soak monitor."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from soaklab.cli.args import override_arguments, owner_arguments
from soaklab.errors import REQUEUE_EXIT, InvalidInput


def cmd_train(args: argparse.Namespace) -> int:
    from soaklab.config.host import HOST_CAPABILITIES_ENV, probe_host
    from soaklab.config.resolve import RunSource, obtain
    from soaklab.mps.client import select_for_run
    from soaklab.rl.train import train

    if os.environ.get(HOST_CAPABILITIES_ENV):
        raise InvalidInput(f"{HOST_CAPABILITIES_ENV}: simulates a host for planning and resolution only; "
                           "unset it to train on this host")
    if args.resume is not None:
        if args.run_config is not None or args.algo or args.overrides:
            raise InvalidInput("--resume: takes the run's own run_config.json; "
                               "give no --run-config, owner or overrides")
        record = args.resume / "run_config.json"
        if not record.is_file():
            raise InvalidInput(f"--resume {args.resume}: no run_config.json there; not a run dir")
        args.run_config = record
    source = RunSource(args.run_config, args.algo, args.task, args.sim, tuple(args.overrides), args.assets_manifest)
    # NVML describes the GPUs without a CUDA context: the MPS daemon is chosen before one exists.
    resolved = obtain(source, probe_host(cuda_context=False), new_run=args.resume is None)
    run_dir, summary = train(select_for_run(resolved, apply=True), resume=args.resume)
    if summary["status"] == "completed" and not args.skip_post_training:
        from soaklab.policy.post_training import post_training

        post_training(run_dir, resolved.run.training)  # docs/export.md, "At the end of training"
    shutdown = summary["runtime_manifest"]["shutdown"]
    print(f"train: {summary['status']} ({shutdown['classification']}) after {summary['completed_iterations']} "
          f"iterations, {summary['total_env_steps']} env steps; {run_dir}/run_summary.json")
    if shutdown["cleanup"]["errors"]:
        print(f"train: cleanup errors: {shutdown['cleanup']['errors'][0]}", file=sys.stderr)
    code = 0 if summary["status"] == "completed" and not shutdown["cleanup"]["errors"] else 1
    resumable_at = (shutdown.get("cancellation") or {}).get("resumable_checkpoint")
    if code and resumable_at is not None and shutdown["classification"] == "external_cancellation":
        print(f"train: {shutdown['cancellation']['signal']} after a resumable checkpoint at iteration {resumable_at}; "
              f"`soaklab train --resume {run_dir}` continues it (exit {REQUEUE_EXIT}: requeue me)", file=sys.stderr)
        return REQUEUE_EXIT
    if code and resolved.ranks.parallel and resolved.ranks.backend == "nccl":
        from soaklab.host.lifetime import exit_now

        exit_now(code)  # a failed NCCL group: the interpreter's teardown would block (exit_now says why)
    return code


def cmd_soak(args: argparse.Namespace) -> int:
    from soaklab.host import numerics

    profile = None
    if args.numerics is not None:
        try:
            profile = numerics.parse_profile("--numerics", args.numerics)
        except numerics.ProfileError as exc:
            raise InvalidInput(str(exc)) from None
        applied = numerics.apply(profile)  # before anything below imports torch; the trainer inherits it
    from soaklab.soak.monitor import Monitor, resolve_request
    from soaklab.soak.request import SoakRequest, check_budget

    budget = check_budget({"min-duration-seconds": args.min_duration_seconds,
                           "sample-interval-seconds": args.sample_interval_seconds,
                           "startup-timeout-seconds": args.startup_timeout_seconds,
                           "stale-progress-seconds": args.stale_progress_seconds,
                           "post-shutdown-grace-seconds": args.post_shutdown_grace_seconds})
    for flag, value in (("--num-envs", args.num_envs), ("--iterations", args.iterations)):
        if value is not None and value < 1:
            raise InvalidInput(f"{flag}={value}: expected an integer >= 1")
    request = SoakRequest(run_config=args.run_config, algo=args.algo, task=args.task, sim=args.sim,
                          num_envs=args.num_envs, iterations=args.iterations,
                          extra_overrides=tuple(args.extra_override), budget=budget, log_dir=args.log_dir,
                          output=args.output, evidence_dir=args.evidence_dir)
    resolved = resolve_request(request)
    if profile is not None and resolved.run.env.num_threads != profile.threads:
        raise InvalidInput(f"--numerics: threads {profile.threads}, but the run's env.num_threads is "
                           f"{resolved.run.env.num_threads}; the profile fixes both "
                           f"(set env.num_threads={profile.threads})")
    monitor = Monitor(request, resolved, args.argv, numerics=applied if profile is not None else None)
    soak = monitor.run()
    if monitor.write_errors:  # the verdict exists only in this process: the run cannot count as passed
        print(f"soak: failed: {soak['status']} but not recorded ({monitor.write_errors[0]})", file=sys.stderr)
        return 1
    if soak["status"] == "passed":
        print(f"soak: passed in {soak['duration_s']:.0f}s; {args.output}")
        return 0
    print(f"soak: failed ({soak['failure_classification']}): {soak['failure_reason']}; {args.output}",
          file=sys.stderr)
    if monitor.requeue():
        return REQUEUE_EXIT
    return 1


def cmd_shm_reclaim(args: argparse.Namespace) -> int:
    from soaklab.rl.shm import pid_namespace, reclaim_orphans, unjudged_segments

    reclaimed, errors = reclaim_orphans(dry_run=args.dry_run)
    verb = "would reclaim" if args.dry_run else "reclaimed"
    for name in reclaimed:
        print(f"shm: {verb} /dev/shm/{name}")
    # Never unlinked from here: their learner's pid means nothing in this namespace (docs/soak.md).
    for name in unjudged_segments():
        print(f"shm: left /dev/shm/{name}: not made in this pid namespace (pid:[{pid_namespace()}]); run "
              "`soaklab shm reclaim` where it was made, or remove it by hand once no run uses it")
    for line in errors:
        print(f"shm: could not reclaim {line}", file=sys.stderr)
    print(f"shm: {verb} {len(reclaimed)} segment(s) of learners that are gone")
    return 1 if errors else 0


def add_run_commands(sub: Any) -> None:
    """Train and soak: a run, alone or under the soak monitor."""
    train = sub.add_parser("train", help="run the learner and its collector")
    train.add_argument("--run-config", type=Path, help="a run_config.json from `soaklab config resolve` (loaded)")
    train.add_argument("--resume", type=Path, metavar="RUN_DIR",
                       help="continue an interrupted run in place from its newest checkpoint (its run_config.json)")
    owner_arguments(train, required=False)
    train.add_argument("--assets-manifest", type=Path, help="the asset manifest (the run config's, or results/assets/)")
    train.add_argument("--skip-post-training", action="store_true",
                       help="no ONNX export or playback at the end (the soak monitor passes it; `snakemake play` "
                            "makes both for soaked runs)")
    override_arguments(train)
    train.set_defaults(func=cmd_train)

    soak = sub.add_parser("soak", help="run the trainer under the soak monitor, write the soak JSON")
    soak.add_argument("--run-config", type=Path, help="a run_config.json from `soaklab config resolve` (loaded)")
    owner_arguments(soak, required=False)
    soak.add_argument("--num-envs", type=int, help="algo.num_envs (must agree with --run-config)")
    soak.add_argument("--iterations", type=int, help="algo.max_iterations (must agree with --run-config)")
    budget_help = {"min-duration": "a shorter run fails as min_duration_not_met",
                   "sample-interval": "between the monitor's samples",
                   "startup-timeout": "longest wait for the first progress",
                   "stale-progress": "longest silence of the run dir before the trainer is ended",
                   "post-shutdown-grace": "wait after the trainer exits before listing what outlived it"}
    for flag, text in budget_help.items():
        soak.add_argument(f"--{flag}-seconds", type=float, required=True, metavar="S", help=text)
    soak.add_argument("--extra-override", action="append", default=[], metavar="KEY=VALUE",
                      help="a further config override (not one the monitor owns); repeatable")
    soak.add_argument("--log-dir", type=Path, required=True, help="the run dir (new or empty)")
    soak.add_argument("--output", type=Path, required=True, help="the soak JSON")
    soak.add_argument("--evidence-dir", type=Path, help="also copy the evidence here (kept when a DAG job fails)")
    soak.add_argument("--numerics", metavar="JSON",
                      help="a numerics profile to run under ({\"cpu_capability\": \"avx2\", \"threads\": 2, "
                           "\"task_terms\": \"inductor\"}; docs/records.md): a bitwise record's runs carry one")
    soak.set_defaults(func=cmd_soak)

    shm = sub.add_parser("shm", help="shared memory of runs")
    shm_sub = shm.add_subparsers(dest="shm_command", metavar="ACTION", required=True)
    reclaim = shm_sub.add_parser("reclaim", help="unlink /dev/shm segments whose learner is gone (a whole process "
                                 "tree killed at once); only those made in this pid namespace: the others "
                                 "are listed, never unlinked")
    reclaim.add_argument("--dry-run", action="store_true", help="list them, unlink nothing")
    reclaim.set_defaults(func=cmd_shm_reclaim)
