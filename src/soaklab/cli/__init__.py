"""The `soaklab` command line (docs/architecture.md).

Exit 0 = success; 2 = invalid input or configuration (nothing spawned or
written); 1 = runtime failure. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from soaklab.cli.args import Parser
from soaklab.cli.bench import add_bench_commands, cmd_bench_backend
from soaklab.cli.evidence import add_evidence_commands, cmd_metrics, cmd_validate
from soaklab.cli.outcomes import add_outcome_commands
from soaklab.cli.policy import add_policy_commands, cmd_deploy_check, cmd_evaluate, cmd_export, cmd_play
from soaklab.cli.records import add_record_commands, cmd_record_compare, cmd_record_verdict
from soaklab.cli.run import add_run_commands, cmd_soak
from soaklab.cli.setup import add_setup_commands, cmd_config_resolve, cmd_mps_ensure
from soaklab.errors import SoaklabError
from soaklab.policy.gl import gl_load_error, preset_gl


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


# What each writing command reads and writes (argparse destinations), checked by main before the
# command runs: an output over an input is refused (soaklab.files.outpaths).
READS_WRITES: dict[Any, tuple[tuple[str, ...], tuple[str, ...]]] = {  # as typed: --flags and positional metavars
    cmd_config_resolve: (("--assets-manifest",), ("--out",)),
    cmd_mps_ensure: (("--run-config",), ("--out",)),
    cmd_soak: (("--run-config",), ("--output", "--evidence-dir")),
    cmd_metrics: (("RUN_DIR",), ("--out", "--csv", "--plot", "--html")),
    cmd_validate: (("--soak", "--run-dir", "--metrics", "--run-config"), ("--out", "--html")),
    cmd_export: (("--checkpoint",), ("--out",)),
    cmd_play: (("--checkpoint",), ("--out",)),
    cmd_evaluate: (("RUN_DIR", "--checkpoint"), ("--out", "--html")),  # never into the run's evidence
    cmd_deploy_check: (("POLICY_ONNX",), ("--out",)),
    cmd_record_compare: (("--records",), ("--out", "--html")),
    cmd_record_verdict: (("COMPARISON",), ("--out",)),
    cmd_bench_backend: (("--assets-manifest",), ("--output",)),
}


# Commands that add their outputs to a run dir: every file they write, none over the run's own.
ADDS_TO_RUN_DIR: dict[Any, Any] = {
    cmd_export: lambda out: [out, out.with_name(out.stem + ".parity.json"), out.with_name(out.stem + ".contract.json")],
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
            parser.error("arguments after --: only `soaklab record update` and `record bisect` pass arguments on "
                         "(to Snakemake)")
        return args
    args.passthrough = passthrough
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from soaklab.catalogue import PLUGIN_ERRORS

    if PLUGIN_ERRORS:  # fail closed: no command runs with a plug-in half installed
        print(f"soaklab: error: {PLUGIN_ERRORS[0]}", file=sys.stderr)
        return 2
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
