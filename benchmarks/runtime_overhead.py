#!/usr/bin/env python3
"""Two-process runner overhead against the env-only probe, at 256 and 1024 G1 envs.

For each size: the phase-local probe (env only, same envs and physics threads), then
the real learner + collector for SAC and FlashSAC with inference on and updates held
off. Writes benchmarks/cpu/runtime_overhead.json: median env-steps/s of each, their
ratio, and the medians of where the runner's iteration goes (learner inference; learner
ingress, which is the wait for the collector's step plus the copy into replay; collector env
step, action wait, ingress write).

    .venv/bin/python benchmarks/runtime_overhead.py [--iters 60] [--out benchmarks/cpu]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from soaklab.bench.backend import ProbeSettings, run_probe
from soaklab.config.host import probe_host
from soaklab.config.resolve import RunRequest, resolve
from soaklab.config.run_config import assets_record
from soaklab.hostinfo import git_state, host_record, versions
from soaklab.metrics.events import current_tags, event_file, read_scalars
from soaklab.metrics.tags import ITERATION_TAG
from soaklab.rl.runner import Learner
from soaklab.rl.train import prepare_run_dir

MANIFEST = Path("results/assets/manifest.json")
BREAKDOWN = ("Perf/learner_inference_ms", "Perf/learner_ingress_ms", "Perf/collector_env_step_ms",
             "Perf/collector_action_wait_ms", "Perf/collector_ingress_write_ms")


def medians(run_dir: Path, warmup: int) -> dict[str, float]:
    frame = current_tags(read_scalars(event_file(run_dir)))
    out = {}
    for tag in (ITERATION_TAG, *BREAKDOWN):
        points = frame[frame["tag"] == tag].sort_values("step")
        out[tag] = statistics.median(points["value"].tolist()[warmup:])
    return out


def runner_rate(algo: str, envs: int, iters: int, warmup: int, workdir: Path) -> dict:
    run_dir = workdir / f"{algo}-{envs}"
    overrides = [f"algo.num_envs={envs}", f"algo.max_iterations={iters}", "algo.replay_buffer_size=20000",
                 f"training.log_dir={json.dumps(str(run_dir))}", f"algo.save_interval={iters}"]
    resolved = resolve(RunRequest(algo, "g1_motion_tracking", "mujoco", tuple(overrides), MANIFEST), probe_host())
    run_dir, resolved = prepare_run_dir(resolved)
    summary = Learner(resolved, run_dir, hold_updates=True).run()
    assert summary["status"] == "completed", summary["failure_reason"]
    m = medians(run_dir, warmup)
    return {"env_steps_per_s": envs / (m[ITERATION_TAG] / 1e3), "iteration_ms": m[ITERATION_TAG],
            **{tag.split("/")[1]: value for tag, value in m.items() if tag in BREAKDOWN}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/cpu"))
    args = parser.parse_args()
    assets = assets_record(MANIFEST)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for envs in (256, 1024):
            probe = run_probe(["mujoco"], ProbeSettings(envs, args.warmup, args.iters, None, 1, 1,
                                                        Path(assets["scene"]), Path(assets["motion"])),
                              Path(tmp) / f"probe-{envs}.json", ["bench", "backend"])["results"][0]
            for algo in ("sac", "flashsac"):
                runner = runner_rate(algo, envs, args.iters, args.warmup, Path(tmp))
                ratio = runner["env_steps_per_s"] / probe["throughput_env_control_steps_per_s"]
                rows.append({"algo": algo, "num_envs": envs, "physics_threads": probe["threads"],
                             "probe_env_steps_per_s": probe["throughput_env_control_steps_per_s"],
                             "runner": runner, "runner_over_probe": ratio})
                print(f"{algo:>8} {envs:>5} envs: runner {runner['env_steps_per_s']:7.0f}/s, probe "
                      f"{probe['throughput_env_control_steps_per_s']:7.0f}/s -> {ratio:.1%}; inference "
                      f"{runner['learner_inference_ms']:.1f} ms, ingress wait+copy "
                      f"{runner['learner_ingress_ms']:.1f} ms, "
                      f"env step {runner['collector_env_step_ms']:.1f} ms, ingress write "
                      f"{runner['collector_ingress_write_ms']:.1f} ms", flush=True)
    record = {"kind": "runtime_overhead", "command": "python benchmarks/runtime_overhead.py", "host": host_record(),
              "versions": versions(), "git": git_state(),
              "settings": {"iters": args.iters, "warmup": args.warmup, "updates": "held off",
                           "inference": "policy (explore)"},
              "results": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "runtime_overhead.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
