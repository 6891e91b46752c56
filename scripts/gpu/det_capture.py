#!/usr/bin/env python3
"""On the GPU machine: whether the env step captures in each mode, bit for bit or not, and at what cost.

For each world count, mode (deterministic: `training.deterministic`'s SOAKLAB_DETERMINISTIC=1,
opt.deterministic = ALL and soaklab's sorts; default) and Jacobian layout (auto: the backend's own
choice, dense in the deterministic mode; sparse or dense forced on the model), builds soaklab's MJWarp
backend and reports whether the step and reset were captured (else the backend's reason, which names
where the capture failed). Then two backends stepped 20 control steps from one state, bit for bit or
not, and the step's median time (CUDA events, after warm-up), captured or eager. One JSON line per
case, all of them in --out (written after each case).

    bash scripts/gpu/bootstrap.sh python3 scripts/gpu/det_capture.py --worlds 1024,4096 --out det_capture.json

Found on an H100 (2026-12-07, benchmarks/visits/2026-12-07-det-deploy/): at 1024 worlds the
deterministic capture of the sparse layout failed (`Array shapes must not exceed ... 6991922687`) and
the runs stepped eagerly; hence the dense default in that mode (soaklab.sim.mjwarp.DENSE_REASON).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="64,256,1024,4096")
    parser.add_argument("--jacobians", default="auto,sparse",
                        help="comma-separated: auto (the backend's choice), dense, sparse")
    parser.add_argument("--contact-jac", default="soaklab", choices=("soaklab", "mujoco-warp"),
                        help="the deterministic dense step's contact Jacobian: soaklab's one dof block "
                             "(soaklab.sim.mjwarp_contact_jac) or mujoco_warp's default blocks")
    parser.add_argument("--exact-adds", default="soaklab", choices=("soaklab", "mujoco-warp"),
                        help="the deterministic step's actuator, actuation-derivative and gravcomp launches: "
                             "without ordered records where the model proves their adds exact "
                             "(soaklab.sim.mjwarp_exact_adds) or with them, as mujoco_warp builds them")
    parser.add_argument("--modes", default="deterministic,default",
                        help="comma-separated: deterministic, default (each runs every layout asked)")
    parser.add_argument("--graphs", default="capture",
                        help="comma-separated: capture (the backend's graphs), eager (no capture: warp sorts "
                             "only the records a launch wrote, where a replay sorts every slot)")
    parser.add_argument("--census", type=int, default=0, metavar="STEPS",
                        help="profile this many steps of each case (torch profiler, CUPTI): the kernels that "
                             "take the step's GPU time, grouped by warp function or name")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cuda:0", help="cpu: warp's CPU device (its capture records only)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    # every option checked before the assets are pulled or a backend built: a typo fails at once
    try:
        worlds = [int(w) for w in args.worlds.split(",")]
    except ValueError:
        worlds = []
    if not worlds or min(worlds) < 1:
        parser.error(f"--worlds: {args.worlds}: expected comma-separated positive integers")
    modes, graphs = args.modes.split(","), args.graphs.split(",")
    if set(modes) - {"deterministic", "default"}:
        parser.error(f"--modes: {args.modes}: expected deterministic and/or default")
    if set(graphs) - {"capture", "eager"}:
        parser.error(f"--graphs: {args.graphs}: expected capture and/or eager")
    if set(args.jacobians.split(",")) - {"auto", "dense", "sparse"}:
        parser.error(f"--jacobians: {args.jacobians}: expected auto, dense, sparse")
    if args.steps < 1 or args.census < 0:
        parser.error(f"--steps {args.steps} / --census {args.census}: steps at least 1, census 0 or more")
    if args.census and not args.device.startswith("cuda"):
        parser.error(f"--census {args.census}: profiles CUDA kernels; not on --device {args.device}")
    import mujoco
    import numpy as np

    from soaklab.assets.pull import PullRequest, pull_assets
    from soaklab.config.compose import compose
    from soaklab.tasks.g1_tracking.env import TrackingConfig, build_tracking_model

    manifest_path = Path("results/assets/manifest.json")
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
    else:
        wheel = next(Path("resources/assets/cache").glob("mjlab-*.whl"))
        manifest = pull_assets(PullRequest(robot="g1", source=str(wheel), motion=None, dest=Path("resources/assets"),
                                           manifest=manifest_path, repair=False, clip="largebox"))
    cfg = TrackingConfig.from_config(compose("flashsac", "g1_motion_tracking", "mujoco", []).config["task"])
    layouts = {"auto": None, "dense": mujoco.mjtJacobian.mjJAC_DENSE, "sparse": mujoco.mjtJacobian.mjJAC_SPARSE}
    cases: list[dict] = []
    if args.contact_jac == "mujoco-warp":
        mujoco_warps_blocks()
    if args.exact_adds == "mujoco-warp":
        mujoco_warps_records()
    combos = [(mode, name, graph) for mode in modes for name in args.jacobians.split(",") for graph in graphs]
    for n in worlds:
        for mode, name, graph in combos:
            # what host.determinism.enter exports in a run; the backend reads it when it is built
            os.environ.pop("SOAKLAB_DETERMINISTIC", None)
            if mode == "deterministic":
                os.environ["SOAKLAB_DETERMINISTIC"] = "1"
            model, _, _ = build_tracking_model(manifest["scene"]["path"], cfg)
            if layouts[name] is not None:
                model.opt.jacobian = layouts[name]
            rng = np.random.default_rng(3)
            qpos = np.tile(model.qpos0, (n, 1)) + rng.normal(0, 0.02, (n, model.nq))
            qpos[:, 2] = model.qpos0[2]
            qvel = rng.normal(0, 0.1, (n, model.nv))
            case: dict = {"worlds": n, "mode": mode, "jacobian_asked": name, "contact_jac": args.contact_jac,
                          "exact_adds_asked": args.exact_adds,
                          "graph_asked": graph}
            try:
                case.update(run_case(model, n, cfg.decimation, qpos, qvel, args, use_graph=graph == "capture"))
            except Exception as exc:  # one case's failure (memory at 4096, say) leaves the others to run
                case["error"] = f"{type(exc).__name__}: {exc}"
            print(json.dumps(case), flush=True)
            cases.append(case)
            args.out.write_text(json.dumps({"device": args.device, "steps": args.steps, "cases": cases}, indent=2)
                                + "\n")  # after every case: a command cut short keeps what was done
    return 0


def mujoco_warps_blocks() -> None:
    """The deterministic step as before soaklab.sim.mjwarp_contact_jac: mujoco_warp's default tile
    (two blocks for the G1), whose J.qvel adds warp orders through records (the comparison)."""
    from soaklab.sim import mjwarp_contact_jac

    mjwarp_contact_jac.one_block = lambda m: None


def mujoco_warps_records() -> None:
    """The deterministic step as before soaklab.sim.mjwarp_exact_adds: every float-adding launch with
    warp's ordered records (the comparison)."""
    from soaklab.sim import mjwarp_exact_adds

    mjwarp_exact_adds.install = lambda model: mjwarp_exact_adds.ExactAdds(())


def kernel_census(step, steps: int) -> dict:
    """The GPU time of `steps` calls of `step`, by kernel group (warp's kernels by their function, the
    others by name: the deterministic mode's sorts are CUB's), largest first; graph replays included."""
    import re
    from collections import defaultdict

    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    warp_kernel = re.compile(r"^(?P<fn>.+?)_[0-9a-f]{6,}_cuda_kernel_(forward|backward)$")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    groups: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type != DeviceType.CUDA:
            continue
        m = warp_kernel.match(ev.name)
        key = f"warp:{m.group('fn')}" if m else ev.name[:100]
        groups[key][0] += 1
        groups[key][1] += ev.time_range.end - ev.time_range.start
    busy = sum(us for _, us in groups.values())
    top = sorted(groups.items(), key=lambda kv: -kv[1][1])[:15]
    return {"steps": steps, "busy_ms_per_step": round(busy / steps / 1e3, 3),
            "kernels_per_step": round(sum(c for c, _ in groups.values()) / steps, 1),
            "top": [{"group": k, "launches_per_step": round(c / steps, 2), "ms_per_step": round(us / steps / 1e3, 3)}
                    for k, (c, us) in top]}


def run_case(model, n: int, decimation: int, qpos, qvel, args: argparse.Namespace, use_graph: bool = True) -> dict:
    """Two backends from one state: captured or why not, bits (and the state's digest after --steps),
    the step's time (captured or eager)."""
    import hashlib

    import numpy as np
    import torch

    from soaklab.sim.mjwarp import MjwarpBackend

    case: dict = {}
    states, step_ms = [], None
    for attempt in range(2):
        backend = MjwarpBackend(model, num_envs=n, decimation=decimation, device=args.device, use_graph=use_graph)
        graph = backend.diagnostics()["diagnostics"]["cuda_graph"]
        diag = backend.diagnostics()["diagnostics"]
        case.update(jacobian=diag["jacobian"], contact_jac_tile=diag["contact_jac_tile"],
                    exact_adds=diag["exact_adds"], captured=graph["enabled"],
                    reason=graph["disable_reason"])
        backend.reset(np.arange(n), qpos, qvel)
        backend.ctrl_tensor.copy_(torch.linspace(-1, 1, backend.ctrl_tensor.numel(), device=args.device)
                                  .reshape(backend.ctrl_tensor.shape))
        for _ in range(args.steps):
            backend.step()
        states.append(backend.state.clone())
        if attempt == 0 and args.device.startswith("cuda"):  # CUDA events, the first 5 of 25 as warm-up
            times = []
            for _ in range(25):
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                backend.step()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            step_ms = float(np.median(times[5:]))
            if args.census:
                try:  # a profiler that fails (no CUPTI) leaves the case's bits and time standing
                    case["census"] = kernel_census(backend.step, args.census)
                except Exception as exc:  # noqa: BLE001
                    case["census"] = {"error": f"{type(exc).__name__}: {exc}"}
        backend.close()
    # the state's digest: equal across two invocations (--exact-adds soaklab and mujoco-warp, say) where
    # what they changed leaves the bits as they were
    digest = hashlib.sha256(states[0].cpu().numpy().tobytes()).hexdigest()[:16]
    case.update(bitwise=bool(torch.equal(states[0], states[1])), state_sha256=digest, step_ms_median=step_ms,
                env_steps_per_s=None if step_ms is None else n / step_ms * 1e3)
    return case


if __name__ == "__main__":
    raise SystemExit(main())
