"""The `soaklab` command line (docs/architecture.md).

Exit 0 = success; 2 = invalid input or configuration (nothing spawned or
written); 1 = runtime failure. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from soaklab.errors import REQUEUE_EXIT, InvalidInput, RuntimeFailure, SoaklabError
from soaklab.policy.gl import GL_BACKENDS, gl_load_error, preset_gl


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
        f"config: {c.algo}/{c.task}/{c.sim} num_envs={resolved.settings.num_envs} "
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
    resolved = obtain(source, probe_host(cuda_context=False))
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


def cmd_metrics(args: argparse.Namespace) -> int:
    from soaklab.metrics.extract import extract_metrics

    metrics = extract_metrics(args.run_dir, args.last, args.out, args.csv, args.plot, args.html,
                              args.legacy_unversioned)
    print(f"metrics: last {args.last} windows of {args.run_dir} -> {args.out}")
    shown = {k: v for k, v in metrics["tracking"].items() if v is not None}
    if shown:
        print("metrics: tracking " + ", ".join(f"{k}={v:.3g}" for k, v in shown.items()))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from soaklab.outcomes.validation import validate_soak

    report = validate_soak(args.soak, args.run_dir, args.metrics, args.run_config, args.out, args.html)
    bad = [c for c in report["checks"] if not c["passed"]]
    for check in bad:
        print(f"validate: FAILED {check['name']}: expected {check['expected']!r}, got {check['actual']!r}",
              file=sys.stderr)
    print(f"validate: {len(report['checks']) - len(bad)}/{len(report['checks'])} checks passed; {args.out}")
    return 1 if bad else 0


def cmd_export(args: argparse.Namespace) -> int:
    from soaklab.files.outpaths import check_out_file
    from soaklab.policy.export import export
    from soaklab.policy.trained import load_trained

    check_out_file(args.out, ".onnx")  # before the checkpoint is read
    record = export(load_trained(args.run_dir, args.checkpoint), args.out)
    parity = record["parity"]
    verdict = "within" if parity["passed"] else "OUTSIDE"
    print(f"export: {args.out} (iteration {record['iteration']}); onnxruntime vs torch on {parity['observations']} "
          f"observations: max |diff| {parity['max_abs_diff']:.2e}, {verdict} {parity['bound']:.0e}")
    if not parity["passed"]:  # the failure's own line, where errors go
        raise RuntimeFailure(f"export: {args.out}: onnxruntime and torch differ by {parity['max_abs_diff']:.2e}, "
                             f"beyond the bound {parity['bound']:.0e}; do not deploy it")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    from soaklab.files.outpaths import check_out_file

    check_out_file(args.out, ".mp4")  # MUJOCO_GL was set from --gl before MuJoCo was imported (preset_gl)
    from soaklab.policy.play import play
    from soaklab.policy.trained import load_trained

    record = play(load_trained(args.run_dir, args.checkpoint), args.out, args.seconds, args.envs)
    print(f"play: {record['frames']} frames at {record['fps']} fps ({record['width']}x{record['height']}, "
          f"MUJOCO_GL={record['gl']}) -> {args.out}; contact sheet {record['contact_sheet']}; "
          f"mean reward {record['mean_reward']:.3f}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from soaklab.files.jsonfiles import write_json_atomic
    from soaklab.policy.evaluate import evaluate
    from soaklab.policy.trained import load_trained

    record = evaluate(load_trained(args.run_dir, args.checkpoint), args.sim, args.episodes, args.clip)
    write_json_atomic(args.out, record)
    if args.html is not None:
        from soaklab.policy.evaluate import write_page

        write_page(record, args.html)
    for clip, f in record["clips"].items():
        print(f"evaluate: {clip} on {record['sim']}" + (" (sim-to-sim)" if record["sim_to_sim"] else "")
              + f": {f['episodes']} episodes from the first frame, success {f['success_rate']:.1%}, tracked "
              f"{f['tracked_fraction']:.1%} of the clip, MPKPE {f['mpkpe_m']:.3f} m (root-relative "
              f"{f['root_relative_mpkpe_m']:.3f} m), joint error {f['joint_error_rad']:.3f} rad -> {args.out}")
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    from soaklab.outcomes.runs import summary_lines

    print("\n".join(summary_lines(args.runs, args.results, args.logs, args.target)))
    return 0


def cmd_wandb_summary(args: argparse.Namespace) -> int:
    from soaklab.outcomes.wandb_summary import write_summary

    run = args.run or args.run_dir.name
    record = write_summary(args.run_dir, run, args.results, args.logs, args.evaluation, args.artifact, args.out,
                           args.html)
    state = "written" if record["state"] == "ok" else f"not written: {record['reason']}"
    print(f"wandb: {run}: summary ({len(record['summary'])} values) and {len(record['artifacts'])} files {state}; "
          f"upload with `{record['sync']}`; {args.out}")
    return 0


def cmd_sweep_summary(args: argparse.Namespace) -> int:
    from soaklab.outcomes.sweep_summary import parse_plan, write_sweep_summary

    plan = parse_plan(args.plan)
    table = write_sweep_summary(plan, args.results, args.logs, args.csv, args.html, args.plot)
    counts = table["status"].value_counts().to_dict()
    print(f"sweep {plan.sweep}: {len(table)} runs, " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
          + f"; table {args.csv} ({args.html}, plot {args.plot})")
    for row in table[table["status"] != "passed"].itertuples():
        print(f"  {row.run}: {row.status} ({row.classification}): {row.reason}")
    return 0


def cmd_record_check(args: argparse.Namespace) -> int:
    from soaklab.records import store

    names = args.names or sorted(p.name for p in args.records.iterdir() if p.is_dir() and not p.name.startswith("."))
    for name in names:
        record = store.load(args.records, name)
        sets = record.artifact_sets()
        for artifacts in record.artifact_folders():
            store.require_spec_agrees(record, artifacts)
        state = f"artifacts of record of {', '.join(s.name for s in sets)}" if sets else "no artifacts of record yet"
        print(f"record {name}: ok ({record.machine}, {record.algo}/{record.task}/{record.sim}, seeds "
              f"{', '.join(str(r.seed) for r in record.runs)}, {len(record.figures)} figures"
              f"{', exact series' if record.exact else ''}"
              f"{f', numerics {record.numerics.label}' if record.numerics else ''}; {state})")
    return 0


def cmd_record_list(args: argparse.Namespace) -> int:
    from soaklab.records import plan, store

    names = sorted(p.name for p in args.records.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))) \
        if args.records.is_dir() else []
    records = {name: store.load(args.records, name) for name in names}  # a bad spec: exit 2, naming it
    print(",".join(plan.ci_records(records) if args.ci else names))
    return 0


def cmd_record_compare(args: argparse.Namespace) -> int:
    from soaklab.records import store
    from soaklab.records.compare import compare
    from soaklab.records.outcome import headline, write_comparison

    record = store.load(args.records, args.name)
    now = store.take_all(record, args.results)
    provenance, recorded = store.read_recorded(record, store.kind_of(now))
    comparison = compare(record, provenance, recorded, now)
    comparison["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    write_comparison(comparison, args.out, args.html)
    print(f"{headline(comparison)}; {args.out}")
    return 0


def cmd_record_verdict(args: argparse.Namespace) -> int:
    from soaklab.records.outcome import read_comparison, verdict_lines

    comparison = read_comparison(args.comparison)
    print("\n".join(verdict_lines(comparison)))
    # A reproduction that cannot be judged bit for bit is still judged on its learning figures.
    if comparison["verdict"] in ("fail", "incomplete") or comparison.get("statistics") == "fail":
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(comparison["verdict"] + "\n")
    return 0


def cmd_record_keep(args: argparse.Namespace) -> int:
    from soaklab.records import store
    from soaklab.records.outcome import read_comparison

    comparison = args.comparison or args.results / "reproduce" / args.name / "comparison.json"
    path = store.keep(args.records, args.name, read_comparison(comparison))
    print(f"record {args.name}: reproduction kept in {path}; `soaklab support-matrix` reads it")
    return 0


def cmd_support_matrix(args: argparse.Namespace) -> int:
    from soaklab.files.jsonfiles import write_text_atomic
    from soaklab.support.matrix import differences, outputs

    root = Path.cwd()
    if not (root / "src" / "soaklab" / "config" / "defaults").is_dir() or not (root / "records").is_dir():
        raise InvalidInput(f"support-matrix: {root} is not a soaklab checkout (no src/soaklab/config/defaults "
                           "or records/); run it from the repository root")
    try:
        expected = outputs(root)
    except ValueError as exc:  # a malformed marker, a configuration with no owner, a README without markers
        raise InvalidInput(f"support-matrix: {exc}") from None
    if args.check:
        diff = differences(root, expected)
        if diff:
            print("\n".join(diff))
            print(f"support-matrix: {', '.join(str(p) for p in expected)} differ from the generator's; "
                  "run `soaklab support-matrix` and commit the result", file=sys.stderr)
            return 1
        print(f"support-matrix: {', '.join(str(p) for p in expected)} match the generator")
        return 0
    for rel, text in expected.items():
        write_text_atomic(root / rel, text)
    print(f"support-matrix: wrote {', '.join(str(p) for p in expected)}")
    return 0


def cmd_record_incomplete(args: argparse.Namespace) -> int:
    from soaklab.records.outcome import mark_incomplete

    mark_incomplete(args.name, args.out, args.reason)
    return 0


def cmd_record_update(args: argparse.Namespace) -> int:
    from soaklab.records import store

    if args.cores < 1:
        raise InvalidInput(f"--cores={args.cores}: expected an integer >= 1")
    record, change = store.update(args.records, args.name, args.cores, args.directory, args.passthrough, args.argv)
    if change is None:
        print(f"record {record.name}: written (first record); {record.folder}")
    else:
        # Every figure whose value moved, not only those outside their band: the diff of the rewrite.
        moved = [f"  {row['verdict']}: {row['name']}: {figure_text(row.get('record'))} -> {figure_text(row.get('now'))}"
                 for row in change["figures"] if row.get("record") != row.get("now")]
        print(f"record {record.name}: rewritten; against the previous record: {change['verdict']}")
        print("\n".join(moved) if moved else "  every figure equal to the previous record's")
    return 0


def figure_text(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


# What each writing command reads and writes (argparse destinations), checked by main before the
# command runs: an output over an input is refused (soaklab.files.outpaths).
READS_WRITES: dict[Any, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # filled below the commands


def _solver_caps(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(c) for c in text.split(",") if c.strip())
    except ValueError:
        raise InvalidInput(f"--solver-caps {text}: a comma list of whole iteration counts, e.g. 10,25") from None


def cmd_bench_backend(args: argparse.Namespace) -> int:
    from soaklab.bench.backend import ProbeSettings, parse_physics_variants, run_probe
    from soaklab.config.run_config import assets_record

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
    bad = [a for a in algos if a not in ("sac", "flashsac")]
    if not algos or bad:
        raise InvalidInput(f"--algos {args.algos}: expected a comma list of sac, flashsac")
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


class HelpFormatter(argparse.HelpFormatter):
    """Each option's default after its help, where it has one worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS) \
                and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """Defaults shown in every help; a usage error is one line and exit 2, like every refusal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _owner(parser: argparse.ArgumentParser, required: bool) -> None:
    """--algo/--task/--sim, with the owners of the YAML tree as choices."""
    from soaklab.config.owners import available_algos, every_sim, every_task

    parser.add_argument("--algo", required=required, choices=available_algos(), help="the algorithm")
    parser.add_argument("--task", required=required, choices=every_task(), help="the task")
    parser.add_argument("--sim", required=required, choices=every_sim(), help="the physics backend")


def _overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="config overrides, VALUE a YAML scalar (docs/settings-contract.md)")


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
    _owner(resolve, required=True)
    _overrides(resolve)
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


def add_run_commands(sub: Any) -> None:
    """Train and soak: a run, alone or under the soak monitor."""
    train = sub.add_parser("train", help="run the learner and its collector")
    train.add_argument("--run-config", type=Path, help="a run_config.json from `soaklab config resolve` (loaded)")
    train.add_argument("--resume", type=Path, metavar="RUN_DIR",
                       help="continue an interrupted run in place from its newest checkpoint (its run_config.json)")
    _owner(train, required=False)
    train.add_argument("--assets-manifest", type=Path, help="the asset manifest (the run config's, or results/assets/)")
    train.add_argument("--skip-post-training", action="store_true",
                       help="no ONNX export or playback at the end (the soak monitor passes it; `snakemake play` "
                            "makes both for soaked runs)")
    _overrides(train)
    train.set_defaults(func=cmd_train)

    soak = sub.add_parser("soak", help="run the trainer under the soak monitor, write the soak JSON")
    soak.add_argument("--run-config", type=Path, help="a run_config.json from `soaklab config resolve` (loaded)")
    _owner(soak, required=False)
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


def add_evidence_commands(sub: Any) -> None:
    """Metrics and validate: a run's evidence read back and checked."""
    metrics = sub.add_parser("metrics", help="last-N metric windows, CSV and plot from a run's event file")
    metrics.add_argument("run_dir", type=Path, help="the run dir holding one event file and run_summary.json")
    metrics.add_argument("--last", type=int, default=20, help="windows (logged iterations) to average")
    metrics.add_argument("--out", type=Path, required=True, help="metrics JSON")
    metrics.add_argument("--csv", type=Path, help="every scalar as CSV")
    metrics.add_argument("--plot", type=Path, help="PNG of throughput, reward and losses")
    metrics.add_argument("--html", type=Path, help="the metrics as an HTML table (for the Snakemake report)")
    metrics.add_argument("--legacy-unversioned", action="store_true",
                         help="read a run without metric_schema_version (lower-case perf/*, timing/* tags)")
    metrics.set_defaults(func=cmd_metrics)

    validate = sub.add_parser("validate", help="check every artifact against its schema and the pass table")
    validate.add_argument("--soak", type=Path, required=True, help="the soak JSON")
    validate.add_argument("--run-dir", type=Path, required=True, help="the trainer's run dir")
    validate.add_argument("--metrics", type=Path, help="the metrics JSON of `soaklab metrics`")
    validate.add_argument("--run-config", type=Path, help="the resolved run config (the run dir's when not given)")
    validate.add_argument("--out", type=Path, required=True, help="the validation JSON")
    validate.add_argument("--html", type=Path, help="the checks as an HTML table (for the Snakemake report)")
    validate.set_defaults(func=cmd_validate)


def add_policy_commands(sub: Any) -> None:
    """Export, play and evaluate: a trained policy put to use."""
    export = sub.add_parser("export", help="the run's policy as ONNX, with an onnxruntime parity check")
    export.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run dir `soaklab train` wrote")
    export.add_argument("--checkpoint", type=Path, help="a checkpoint of the run (its model_final.pt when not given)")
    export.add_argument("--out", type=Path, required=True, help="the .onnx to write (parity JSON beside it)")
    export.set_defaults(func=cmd_export)

    play_cmd = sub.add_parser("play", help="roll the policy out on MuJoCo and render it to MP4 (and a contact sheet)")
    play_cmd.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run dir `soaklab train` wrote")
    play_cmd.add_argument("--checkpoint", type=Path, help="a checkpoint of the run (its model_final.pt when not given)")
    play_cmd.add_argument("--out", type=Path, required=True, help="the .mp4 to write (.png sheet and .json beside it)")
    play_cmd.add_argument("--seconds", type=float, default=5.0, help="how long to play")
    play_cmd.add_argument("--envs", type=int, default=1, help="envs rolled out (env 0 is rendered)")
    play_cmd.add_argument("--gl", choices=GL_BACKENDS,
                          help="MuJoCo's GL backend (default: MUJOCO_GL, else glfw with a display, else egl)")
    play_cmd.set_defaults(func=cmd_play)

    evaluate_cmd = sub.add_parser("evaluate", help="a tracking policy from the clip's first frame: success, MPKPE "
                                  "(docs/learning.md)")
    evaluate_cmd.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run dir `soaklab train` wrote")
    evaluate_cmd.add_argument("--checkpoint", type=Path,
                              help="a checkpoint of the run (its model_final.pt when not given)")
    evaluate_cmd.add_argument("--sim", choices=("mujoco", "mjwarp"), default="mujoco",
                              help="the backend to evaluate on (the other one than the run's: sim-to-sim)")
    evaluate_cmd.add_argument("--episodes", type=int,
                              help="episodes, one env each (default 1024 on mjwarp with a GPU, else 64)")
    evaluate_cmd.add_argument("--clip", help="only this one of the run's clips (a motion library's label)")
    evaluate_cmd.add_argument("--out", type=Path, required=True, help="the evaluation JSON (not inside RUN_DIR)")
    evaluate_cmd.add_argument("--html", type=Path, help="the evaluation as an HTML table (for the Snakemake report)")
    evaluate_cmd.set_defaults(func=cmd_evaluate)


def add_outcome_commands(sub: Any) -> None:
    """Summary and sweep-summary: what a DAG run produced."""
    summary = sub.add_parser("summary", help="each run's verdict, figures and where its results lie (end of a DAG run)")
    summary.add_argument("runs", nargs="+", metavar="RUN", help="run names of the workflow config")
    summary.add_argument("--results", type=Path, default=Path("results"), help="the DAG's results folder")
    summary.add_argument("--logs", type=Path, default=Path("logs"), help="the DAG's logs folder")
    summary.add_argument("--target", default="soak", choices=("soak", "sweep", "reproduce"),
                         help="the target the report line names")
    summary.set_defaults(func=cmd_summary)

    wandb = sub.add_parser("wandb", help="a run's W&B run (training.loggers with wandb)").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    wandb_summary = wandb.add_parser("summary", help="add the DAG's verdict, evaluation and files to the run's W&B run")
    wandb_summary.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the training run dir")
    wandb_summary.add_argument("--run", help="the workflow run's name (default: the run dir's)")
    wandb_summary.add_argument("--results", type=Path,
                               help="the DAG's results/{run}: its soak verdict, metrics and validation")
    wandb_summary.add_argument("--logs", type=Path, help="the DAG's logs/{run} (with --results)")
    wandb_summary.add_argument("--evaluation", type=Path, action="append", default=[],
                               help="an evaluation JSON (soaklab evaluate); repeatable")
    wandb_summary.add_argument("--artifact", type=Path, action="append", default=[],
                               help="a file to log as a W&B artifact (the ONNX policy, the play video); repeatable")
    wandb_summary.add_argument("--out", type=Path, required=True, help="the record: folders, sync command, state")
    wandb_summary.add_argument("--html", type=Path, help="the same as a page (for the Snakemake report)")
    wandb_summary.set_defaults(func=cmd_wandb_summary)

    sweep = sub.add_parser("sweep-summary", help="every run of a sweep in one table: CSV, HTML and a throughput plot")
    sweep.add_argument("--plan", required=True,
                       help="the sweep's runs and their axis values as JSON (the DAG passes it)")
    sweep.add_argument("--results", type=Path, default=Path("results"), help="the DAG's results folder")
    sweep.add_argument("--logs", type=Path, default=Path("logs"), help="the DAG's logs folder")
    sweep.add_argument("--csv", type=Path, required=True, help="the table as CSV")
    sweep.add_argument("--html", type=Path, required=True, help="the table as an HTML page (with the plot)")
    sweep.add_argument("--plot", type=Path, required=True, help="throughput per run, coloured by verdict (PNG)")
    sweep.set_defaults(func=cmd_sweep_summary)


def add_record_commands(sub: Any) -> None:
    """Record and support-matrix: benchmark records and the support levels."""
    record = sub.add_parser("record", help="benchmark records: check, compare, update (docs/records.md)"
                            ).add_subparsers(dest="action", required=True, metavar="ACTION")
    records_help = "the records folder"
    listing = record.add_parser("list", help="the records' names, comma-separated (with --ci: those CI reproduces)")
    listing.add_argument("--records", type=Path, default=Path("records"), help="the records folder")
    listing.add_argument("--ci", action="store_true", help="only the records CI reproduces on every run (ci: true)")
    listing.set_defaults(func=cmd_record_list)
    check = record.add_parser("check", help="read and check record specs (exit 2 naming the record and field)")
    check.add_argument("names", nargs="*", metavar="NAME", help="records to check (every record when none)")
    check.add_argument("--records", type=Path, default=Path("records"), help=records_help)
    check.set_defaults(func=cmd_record_check)
    compare = record.add_parser("compare", help="compare a record's reproduced runs with the record")
    compare.add_argument("name", metavar="NAME", help="the record")
    compare.add_argument("--records", type=Path, default=Path("records"), help=records_help)
    compare.add_argument("--results", type=Path, default=Path("results"), help="the DAG's results folder")
    compare.add_argument("--out", type=Path, required=True, help="the comparison JSON")
    compare.add_argument("--html", type=Path, help="the comparison as an HTML page")
    compare.set_defaults(func=cmd_record_compare)
    verdict = record.add_parser("verdict", help="print a comparison's verdict; exit 1 on fail or incomplete")
    verdict.add_argument("comparison", type=Path, metavar="COMPARISON", help="a comparison JSON")
    verdict.add_argument("--out", type=Path, required=True, help="the verdict, written when it is not a failure")
    verdict.set_defaults(func=cmd_record_verdict)
    incomplete = record.add_parser("incomplete", help="mark a reproduction's comparison incomplete (the DAG's onerror)")
    incomplete.add_argument("name", metavar="NAME", help="the record")
    incomplete.add_argument("--out", type=Path, required=True, help="the comparison JSON")
    incomplete.add_argument("--reason", required=True, help="why it stopped")
    incomplete.set_defaults(func=cmd_record_incomplete)
    keep = record.add_parser("keep", help="keep a passing reproduction in the record (the support matrix's evidence)")
    keep.add_argument("name", metavar="NAME", help="the record")
    keep.add_argument("--records", type=Path, default=Path("records"), help=records_help)
    keep.add_argument("--results", type=Path, default=Path("results"), help="the DAG's results folder")
    keep.add_argument("--comparison", type=Path,
                      help="the comparison JSON (default: RESULTS/reproduce/NAME/comparison.json)")
    keep.set_defaults(func=cmd_record_keep)
    update = record.add_parser("update", help="rerun a record's seeds through the workflow and rewrite the record",
                               usage="soaklab record update NAME [options] [-- SNAKEMAKE_ARGS ...]",
                               epilog="Arguments after -- go to Snakemake as they are (--configfile local.yaml).")
    update.add_argument("name", metavar="NAME", help="the record")
    update.add_argument("--records", type=Path, default=Path("records"), help=records_help)
    update.add_argument("--cores", type=int, default=1, help="Snakemake's --cores")
    update.add_argument("--directory", type=Path, help="Snakemake's working directory (results/ under it)")
    update.set_defaults(func=cmd_record_update, passthrough=[])

    matrix = sub.add_parser("support-matrix", help="write docs/support-matrix.md and .json from the validation "
                            "inventory (docs/support-levels.md)")
    matrix.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 with a diff when the committed files differ from the generator's")
    matrix.set_defaults(func=cmd_support_matrix)


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


def build_parser() -> argparse.ArgumentParser:
    from soaklab import __version__

    parser = Parser(prog="soaklab", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_setup_commands(sub)
    add_run_commands(sub)
    add_evidence_commands(sub)
    add_policy_commands(sub)
    add_outcome_commands(sub)
    add_record_commands(sub)
    add_bench_commands(sub)
    return parser


READS_WRITES.update({  # as typed: --flags and positional metavars
    cmd_config_resolve: (("--assets-manifest",), ("--out",)),
    cmd_mps_ensure: (("--run-config",), ("--out",)),
    cmd_soak: (("--run-config",), ("--output", "--evidence-dir")),
    cmd_metrics: (("RUN_DIR",), ("--out", "--csv", "--plot", "--html")),
    cmd_validate: (("--soak", "--run-dir", "--metrics", "--run-config"), ("--out", "--html")),
    cmd_export: (("--checkpoint",), ("--out",)),
    cmd_play: (("--checkpoint",), ("--out",)),
    cmd_evaluate: (("RUN_DIR", "--checkpoint"), ("--out", "--html")),  # never into the run's evidence
    cmd_record_compare: (("--records",), ("--out", "--html")),
    cmd_record_verdict: (("COMPARISON",), ("--out",)),
    cmd_bench_backend: (("--assets-manifest",), ("--output",)),
})


# Commands that add their outputs to a run dir: every file they write, none over the run's own.
ADDS_TO_RUN_DIR: dict[Any, Any] = {
    cmd_export: lambda out: [out, out.with_name(out.stem + ".parity.json")],
    cmd_play: lambda out: [out, out.with_suffix(".png"), out.with_suffix(".json")],
}


def check_outputs(args: argparse.Namespace) -> None:
    from soaklab.files.outpaths import dest, refuse_over_evidence, refuse_overlaps

    reads, writes = READS_WRITES.get(args.func, ((), ()))
    refuse_overlaps({f: getattr(args, dest(f), None) for f in reads},
                    {f: getattr(args, dest(f), None) for f in writes})
    if args.func in ADDS_TO_RUN_DIR:
        written = ADDS_TO_RUN_DIR[args.func](args.out)
        refuse_over_evidence("RUN_DIR", args.run_dir, {"--out" if p == args.out else f"(beside --out) {p.name}": p
                                                     for p in written})


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The command's own arguments, and what follows the first "--" as `passthrough` untouched
    (argparse's REMAINDER would also swallow the options written after the command's positional
    argument: `record update NAME --cores 16 -- --configfile x.yaml` reached Snakemake whole)."""
    own, passthrough = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser.parse_args(own)
    if not hasattr(args, "passthrough"):
        if "--" in argv:
            parser.error("arguments after --: only `soaklab record update` passes arguments on (to Snakemake)")
        return args
    args.passthrough = passthrough
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        preset_gl(argv)  # MuJoCo fixes MUJOCO_GL when first imported: the parser imports it
    except SoaklabError as exc:
        print(f"soaklab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        parser = build_parser()  # imports MuJoCo, which loads the GL backend MUJOCO_GL names
    except (AttributeError, ImportError, OSError, RuntimeError) as exc:
        if "MUJOCO_GL" not in os.environ:
            raise
        print(f"soaklab: error: {gl_load_error(os.environ['MUJOCO_GL'], exc)}", file=sys.stderr)
        return 2
    try:
        args = parse(parser, argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed as one line
        return int(exc.code or 0)
    args.argv = argv  # the exact command, recorded by benchmarks
    try:
        check_outputs(args)
        return int(args.func(args))
    except SoaklabError as exc:
        print(f"soaklab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("soaklab: interrupted", file=sys.stderr)
        return 130
