#!/usr/bin/env python3
"""On the GPU machine: compile mujoco_warp's kernels for the G1 tracking scene, time the raw ceiling.

Pulls the G1 assets from the carried pinned wheel, builds the tracking model (the
scene plus the task's sensors), puts it on the GPU for each world count with
per-world contact/constraint sizes, captures `decimation` physics steps in one CUDA
graph and times replays with CUDA events (median of repeats, after warm-up). Also
reports contact/constraint overflow seen during the run. Writes JSON to --out.

    bash scripts/gpu/bootstrap.sh python3 scripts/gpu/warmup.py --out "$OUT/warmup.json"
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> int:
    # The env's own per-world sizes by default, so the ceiling is the one the env is judged against
    # (until 2026-12-02 this said njmax 192 while the env ran 256).
    from soaklab.sim.mjwarp import DEFAULT_NCONMAX, DEFAULT_NJMAX

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="1024,4096,8192")
    parser.add_argument("--nconmax", type=int, default=DEFAULT_NCONMAX, help="contacts per world")
    parser.add_argument("--njmax", type=int, default=DEFAULT_NJMAX, help="constraint rows per world")
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--deterministic", action="store_true",
                        help="the step training.deterministic takes, built by the backend's own functions "
                             "(soaklab.sim.mjwarp: the dense layout, soaklab's sorts, the one-block contact "
                             "Jacobian, the exact adds; docs/determinism.md): compiles that mode's kernels and "
                             "times its ceiling")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--clip", default="largebox",
                        help="the clip the assets are pulled with (synthetic: no clip wheel on the machine)")
    args = parser.parse_args()

    import mujoco
    import numpy as np

    from soaklab.assets.pull import PullRequest, pull_assets
    from soaklab.bench.timing import warp_replay_ms
    from soaklab.config.compose import compose
    from soaklab.tasks.g1_tracking.env import TrackingConfig, build_tracking_model

    wheel = next(Path("resources/assets/cache").glob("mjlab-*.whl"))
    manifest = pull_assets(PullRequest(robot="g1", source=str(wheel), motion=None, dest=Path("resources/assets"),
                                       manifest=Path("results/assets/manifest.json"), repair=False,
                                       clip=args.clip))
    config = compose("flashsac", "g1_motion_tracking", "mujoco", []).config
    cfg = TrackingConfig.from_config(config["task"])
    model, _, _ = build_tracking_model(manifest["scene"]["path"], cfg)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_forward(model, data)

    t0 = time.perf_counter()
    import mujoco_warp as mjw
    import warp as wp

    wp.init()
    result: dict = {"versions": {"warp": wp.config.version, "mujoco_warp": getattr(mjw, "__version__", None),
                                 "mujoco": mujoco.__version__},
                    "device": wp.get_device().name, "decimation": cfg.decimation, "nconmax": args.nconmax,
                    "njmax": args.njmax, "deterministic": args.deterministic, "runs": []}
    if args.deterministic:  # as the backend builds it (until 2026-12-07 only opt.deterministic was set)
        from soaklab.sim.mjwarp import deterministic_host_model, make_deterministic

        model, _ = deterministic_host_model(model)
        data = mujoco.MjData(model)
        mujoco.mj_resetDataKeyframe(model, data, 0)
        mujoco.mj_forward(model, data)
    wmodel = mjw.put_model(model)
    if args.deterministic:
        build = make_deterministic(mjw, wmodel, model)
        result.update(jacobian="sparse" if wmodel.is_sparse else "dense", contact_jac_tile=build.contact_jac_tile,
                      exact_adds=list(build.exact_adds.names()))
    for n in [int(w) for w in args.worlds.split(",")]:
        wdata = mjw.put_data(model, data, nworld=n, nconmax=args.nconmax, njmax=args.njmax)
        start = time.perf_counter()
        for _ in range(cfg.decimation):  # the first call compiles (or loads the cache)
            mjw.step(wmodel, wdata)
        wp.synchronize()
        first_s = time.perf_counter() - start
        with wp.ScopedCapture() as capture:
            for _ in range(cfg.decimation):
                mjw.step(wmodel, wdata)
        med = statistics.median(warp_replay_ms(capture.graph, args.replays)) / 1e3
        qpos = wdata.qpos.numpy()
        run = {"worlds": n, "first_call_s": round(first_s, 2), "control_step_ms_median": med * 1e3,
               "physics_steps_per_s": n * cfg.decimation / med, "env_steps_per_s": n / med,
               "finite": bool(np.isfinite(qpos).all()),
               "nacon_max_seen": int(wdata.nacon.numpy().max()) if hasattr(wdata, "nacon") else None}
        result["runs"].append(run)
        print(json.dumps(run), flush=True)
    result["compile_and_runs_s"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'worlds':>7} {'physics steps/s':>16} {'env steps/s':>12}")
    for r in result["runs"]:
        print(f"{r['worlds']:>7} {r['physics_steps_per_s']:>16,.0f} {r['env_steps_per_s']:>12,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
