#!/usr/bin/env python3
"""Two-process runner overhead against the env-only probe, at 256 and 1024 G1 envs.

For each size: the phase-local probe (env only, same envs and physics threads, uniform random
actions), then for SAC and FlashSAC the real learner + collector, updates off, on two workloads:
the probe's (uniform random actions: a run's warm-up before algo.learning_starts with
algo.warmup_actions=uniform), which is what `runner_over_probe` compares; and the runner's own
(inference on, the untrained policy's exploring actions, updates held) beside the same env stepped
in one process by the same policy. The two workloads differ in physics, not in runtime: uniform
random joint targets make the G1 fall and reset sooner, a cheaper regime. Writes
benchmarks/cpu/runtime_overhead.json: median env-steps/s of each, the ratios, and the medians of
where the runner's iteration goes (learner inference; learner ingress, which is the wait for the
collector's step plus the copy into replay; collector env step, action wait, ingress write).

    .venv/bin/python benchmarks/cpu/runtime_overhead.py [--iters 60] [--repeats 3] [--out benchmarks/cpu]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from soaklab.assets.record import assets_record
from soaklab.bench.backend import ProbeSettings, run_probe
from soaklab.bench.finished import RunFailed, completed_summary
from soaklab.config.host import probe_host
from soaklab.config.resolve import RunRequest, resolve
from soaklab.host.info import git_state, host_record, versions
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


def runner_rate(algo: str, envs: int, iters: int, warmup: int, workdir: Path, uniform: bool = False) -> dict:
    """The real learner + collector, updates off: answering with the policy (`uniform` False, held
    updates), or in a run's uniform warm-up phase (`uniform`: every iteration before
    algo.learning_starts, the probe's own action distribution)."""
    run_dir = workdir / f"{algo}-{envs}-{'uniform' if uniform else 'policy'}"
    overrides = [f"algo.num_envs={envs}", f"algo.max_iterations={iters}", "algo.replay_buffer_size=20000",
                 f"training.log_dir={json.dumps(str(run_dir))}", f"algo.save_interval={iters}"]
    if uniform:
        overrides += ["algo.warmup_actions=uniform", f"algo.learning_starts={iters}"]
    resolved = resolve(RunRequest(algo, "g1_motion_tracking", "mujoco", tuple(overrides), MANIFEST), probe_host())
    run_dir, resolved = prepare_run_dir(resolved)
    Learner(resolved, run_dir, hold_updates=not uniform).run()
    try:
        completed_summary(run_dir)
    except RunFailed as exc:  # its cause in one line (exit 1), not a traceback
        raise SystemExit(f"runtime_overhead: {exc}") from None
    m = medians(run_dir, warmup)
    return {"env_steps_per_s": envs / (m[ITERATION_TAG] / 1e3), "iteration_ms": m[ITERATION_TAG],
            **{tag.split("/")[1]: value for tag, value in m.items() if tag in BREAKDOWN}}


def same_actions_rate(algo: str, envs: int, iters: int, warmup: int, assets: dict) -> dict:
    """The env alone, in this process, stepped with the untrained policy's exploring actions (the
    runner's seed): the runner's workload without its second process."""
    import time

    import torch

    from soaklab.config.compose import compose
    from soaklab.rl.agents import make_agent
    from soaklab.rl.runner import seed_everything
    from soaklab.tasks.env import EnvSpec
    from soaklab.tasks.registry import make_env
    from soaklab.tasks.spaces import task_spaces

    run = compose(algo, "g1_motion_tracking", "mujoco",
                  [f"algo.num_envs={envs}", f"env.motion={json.dumps(assets['motion'])}"]).run
    seed_everything(run.algo.seed)
    torch.set_num_threads(1)  # as the collector's task terms; MuJoCo's pool has the physics threads
    spaces = task_spaces("g1_motion_tracking")
    agent = make_agent(algo, spaces.actor_obs, spaces.critic_obs, spaces.action, envs, run.algo,
                       torch.device("cpu"))
    env = make_env(run, EnvSpec.of(run), Path(assets["scene"]))
    obs, _ = env.reset()
    steps = []
    for _ in range(warmup + iters):
        with torch.no_grad():
            actions = agent.act(obs, slice(0, envs))
        t0 = time.perf_counter()
        obs = env.step(actions).obs
        steps.append(time.perf_counter() - t0)
    env.close()
    step_ms = statistics.median(steps[warmup:]) * 1e3
    return {"env_steps_per_s": envs / (step_ms / 1e3), "env_step_ms": step_ms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3,
                        help="each measurement this many times, interleaved; medians reported (a shared VM's "
                             "speed drifts by tens of percent within minutes)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/cpu"))
    args = parser.parse_args()
    for flag, value in (("--iters", args.iters), ("--repeats", args.repeats)):
        if value < 1:
            parser.error(f"{flag} {value}: must be >= 1")
    if not 0 <= args.warmup < args.iters:
        parser.error(f"--warmup {args.warmup}: must be >= 0 and below --iters {args.iters}")
    assets = assets_record(MANIFEST)
    rows = []
    rate = "env_steps_per_s"
    with tempfile.TemporaryDirectory() as tmp:
        for envs in (256, 1024):
            settings = ProbeSettings(envs, args.warmup, args.iters, None, 1, 1, Path(assets["scene"]),
                                     Path(assets["motion"]))
            for algo in ("sac", "flashsac"):
                probes, uniforms, runners, alones = [], [], [], []
                for repeat in range(args.repeats):
                    probes.append(run_probe(["mujoco"], settings, Path(tmp) / f"probe-{envs}.json",
                                            ["bench", "backend"])["results"][0])
                    uniforms.append(runner_rate(algo, envs, args.iters, args.warmup, Path(tmp) / f"r{repeat}",
                                                uniform=True))
                    runners.append(runner_rate(algo, envs, args.iters, args.warmup, Path(tmp) / f"r{repeat}"))
                    alones.append(same_actions_rate(algo, envs, args.iters, args.warmup, assets))
                probe_rate = statistics.median(p["throughput_env_control_steps_per_s"] for p in probes)
                uniform = {key: statistics.median(r[key] for r in uniforms) for key in uniforms[0]}
                runner = {key: statistics.median(r[key] for r in runners) for key in runners[0]}
                alone = {key: statistics.median(r[key] for r in alones) for key in alones[0]}
                ratio, like = uniform[rate] / probe_rate, runner[rate] / alone[rate]
                rows.append({"algo": algo, "num_envs": envs, "physics_threads": probes[0]["threads"],
                             "probe_env_steps_per_s": probe_rate,
                             # The probe's workload (uniform random actions) through the runner.
                             "runner_uniform_actions": uniform, "runner_over_probe": ratio,
                             # The runner's own workload (the policy's actions) and the env alone on it.
                             "runner": runner, "env_alone_same_actions": alone,
                             "runner_over_env_alone_same_actions": like,
                             "repeats": {"probe": [p["throughput_env_control_steps_per_s"] for p in probes],
                                         "runner_uniform_actions": [r[rate] for r in uniforms],
                                         "runner": [r[rate] for r in runners], "alone": [r[rate] for r in alones]}})
                print(f"{algo:>8} {envs:>5} envs: runner on uniform actions {uniform[rate]:7.0f}/s, probe "
                      f"{probe_rate:7.0f}/s -> {ratio:.1%}; runner on the policy's actions {runner[rate]:7.0f}/s, "
                      f"env alone on them {alone[rate]:7.0f}/s -> {like:.1%}; "
                      f"inference {runner['learner_inference_ms']:.1f} ms, ingress wait+copy "
                      f"{runner['learner_ingress_ms']:.1f} ms, env step {runner['collector_env_step_ms']:.1f} ms "
                      f"(alone {alone['env_step_ms']:.1f} ms), ingress write "
                      f"{runner['collector_ingress_write_ms']:.1f} ms", flush=True)
    record = {"kind": "runtime_overhead", "command": "python benchmarks/cpu/runtime_overhead.py", "host": host_record(),
              "versions": versions(), "git": git_state(),
              "settings": {"iters": args.iters, "warmup": args.warmup, "repeats": args.repeats,
                           "updates": "off (held, or before algo.learning_starts)",
                           "actions": {"runner_uniform_actions": "uniform random (algo.warmup_actions=uniform)",
                                       "runner": "policy (explore)"}},
              "results": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "runtime_overhead.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
