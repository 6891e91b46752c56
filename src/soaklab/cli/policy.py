"""`soaklab export`, `play` and `evaluate`: a trained policy put to use."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from soaklab.catalogue import BACKENDS
from soaklab.errors import RuntimeFailure
from soaklab.policy.gl import GL_BACKENDS


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
    from soaklab.policy.evaluate import evaluate, unfinished_note
    from soaklab.policy.trained import load_trained

    record = evaluate(load_trained(args.run_dir, args.checkpoint), args.sim, args.episodes, args.clip)
    write_json_atomic(args.out, record)
    if args.html is not None:
        from soaklab.policy.evaluate import write_page

        write_page(record, args.html)
    unfinished = unfinished_note(record)  # an unfinished run's line says so first
    for clip, f in record["clips"].items():
        print(f"evaluate: {unfinished}{clip} on {record['sim']}"
              + (" (sim-to-sim)" if record["sim_to_sim"] else "")
              + f": {f['episodes']} episodes from the first frame, success {f['success_rate']:.1%}, tracked "
              f"{f['tracked_fraction']:.1%} of the clip, MPKPE {f['mpkpe_m']:.3f} m (root-relative "
              f"{f['root_relative_mpkpe_m']:.3f} m), joint error {f['joint_error_rad']:.3f} rad -> {args.out}")
    return 0


def cmd_deploy_check(args: argparse.Namespace) -> int:
    from soaklab.deploy.check import deploy_check
    from soaklab.files.jsonfiles import write_json_atomic
    from soaklab.files.outpaths import check_out_file, refuse_over_policy_folder

    if args.out is not None:
        check_out_file(args.out, ".json")
        refuse_over_policy_folder(args.policy_onnx, args.out)
    record = deploy_check(args.policy_onnx, args.clip, args.episodes, args.seed, args.assets)
    if args.out is not None:
        write_json_atomic(args.out, record)
    probe = record["probe"]
    for clip, f in record["clips"].items():
        tracked = (f", tracked {f['tracked_fraction']:.1%} of the clip, MPKPE {f['mpkpe_m']:.3f} m (root-relative "
                   f"{f['root_relative_mpkpe_m']:.3f} m), joint error {f['joint_error_rad']:.3f} rad"
                   if "mpkpe_m" in f else f", mean episode {f['mean_episode_steps']:.1f} steps")
        print(f"deploy-check: {clip} from {args.policy_onnx} alone on MuJoCo: contract reproduces the policy's first "
              f"{probe['steps']} observations (max |diff| {probe['max_abs_diff']:.1e}); {f['episodes']} "
              f"episode{'' if f['episodes'] == 1 else 's'} (seed {record['seed']}), "
              f"success {f['success_rate']:.1%}{tracked}"
              + (f" -> {args.out}" if args.out is not None else ""))
    return 0


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
    evaluate_cmd.add_argument("--sim", choices=tuple(BACKENDS), default="mujoco",
                              help="the backend to evaluate on (the other one than the run's: sim-to-sim)")
    evaluate_cmd.add_argument("--episodes", type=int,
                              help="episodes, one env each (default 1024 on mjwarp with a GPU, else 64)")
    evaluate_cmd.add_argument("--clip", help="only this one of the run's clips (a motion library's label)")
    evaluate_cmd.add_argument("--out", type=Path, required=True, help="the evaluation JSON (not inside RUN_DIR)")
    evaluate_cmd.add_argument("--html", type=Path, help="the evaluation as an HTML table (for the Snakemake report)")
    evaluate_cmd.set_defaults(func=cmd_evaluate)

    check = sub.add_parser("deploy-check", help="run an exported policy from its ONNX file alone on plain MuJoCo, "
                           "through its contract (docs/export.md)")
    check.add_argument("policy_onnx", type=Path, metavar="POLICY_ONNX", help="a policy.onnx `soaklab export` wrote")
    check.add_argument("--clip", help="only this one of the contract's clips (default: every clip)")
    check.add_argument("--episodes", type=int, default=64, help="episodes, one MjData each (default 64)")
    check.add_argument("--seed", type=int, help="the reset noise's seed (default: the run's env.seed, as evaluate)")
    check.add_argument("--assets", type=Path, help="the asset tree the contract's paths are relative to (default: "
                       "the folder of results/assets/manifest.json's robot tree, else resources/assets)")
    check.add_argument("--out", type=Path, help="the deploy-check record (JSON)")
    check.set_defaults(func=cmd_deploy_check)
