"""`soaklab bench learner`: one learner update (and one inference), eager against captured.

For each agent, batch size and compile scope (`--compile`, the values of
`algo.compile`) the benchmark builds the agent with the G1 tracking task's widths
and the owner's defaults (the tracking recipe's n-step replay, laid out as the
runner lays it out: one row per env and vector step), fills a replay ring with
random transitions, runs `--warmup` updates (which include compilation and the
capture), then times `--iters` single updates, each between two CUDA events on
the learner's stream (host wall time on a CPU), and reports medians. Inference
(the exploring actor forward for `--num-envs` observations) is timed the same
way. Eager runs set SOAKLAB_LEARNER_CUDA_GRAPH=0 for the agent they build; on
CUDA they also profile one update of each variant (kernels launched, their summed
GPU time and the costliest kernels), which is what capture and compilation
change.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from soaklab.bench.timing import time_ms
from soaklab.config.compose import compose
from soaklab.contract.layout import Layout
from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.gpu.capture import GRAPH_ENV
from soaklab.host.info import git_state, host_record, versions
from soaklab.rl.agents import make_agent
from soaklab.rl.replay import ReplayRing
from soaklab.tasks.spaces import TASK_SPACES

SCHEMA_VERSION = 1


def bench_one(algo: str, batch: int, mode: str, device: torch.device, num_envs: int, warmup: int,
              iters: int, replay_rows: int, compile_scope: str = "eager") -> dict[str, Any]:
    spaces = TASK_SPACES["g1_motion_tracking"]
    overrides = [f"algo.batch_size={batch}", f"algo.compile={compile_scope}"]
    run = compose(algo, "g1_motion_tracking", "mujoco", overrides).run
    previous = os.environ.get(GRAPH_ENV)
    os.environ[GRAPH_ENV] = "1" if mode == "captured" else "0"
    try:
        agent = make_agent(algo, spaces.actor_obs, spaces.critic_obs, spaces.action, num_envs, run.algo, device)
    finally:
        if previous is None:
            os.environ.pop(GRAPH_ENV, None)
        else:
            os.environ[GRAPH_ENV] = previous
    layout = Layout(spaces=spaces, num_envs=num_envs, capacity=1, depth=2, slot_rows=num_envs, num_metrics=1)
    replay = ReplayRing(replay_rows, layout.row_width, layout.row_slices(), device, seed=0, stride=num_envs,
                        n_step=run.algo.n_step, gamma=run.algo.gamma)
    generator = torch.Generator(device=device).manual_seed(0)
    replay.add(torch.randn(replay_rows, layout.row_width, generator=generator, device=device) * 0.1)
    agent.bind(replay, batch)
    obs = torch.randn(num_envs, spaces.actor_obs, generator=generator, device=device)
    counter = iter(range(10**9))

    def update() -> None:
        agent.update(next(counter))

    def inference() -> None:
        agent.act(obs, slice(0, num_envs), explore=True)

    for _ in range(warmup):
        update()
        inference()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    update_ms = time_ms(update, iters, device)
    inference_ms = time_ms(inference, iters, device)
    kernels = _profile(update, len(agent.update_variants())) if mode == "eager" and device.type == "cuda" else None
    diagnostics = agent.capture_diagnostics()
    agent.close()
    return {"algo": algo, "batch_size": batch, "mode": mode, "compile": diagnostics["compile"],
            "num_envs": num_envs, "n_step": replay.n_step, "kernels_per_variant_cycle": kernels,
            "update_ms_median": statistics.median(update_ms), "update_ms_p90": _quantile(update_ms, 0.9),
            "inference_ms_median": statistics.median(inference_ms),
            "updates_timed": iters, "cuda_graph": {k: v for k, v in diagnostics.items() if k != "steps"},
            "finite_diagnostics": bool(torch.isfinite(agent.diagnostics).all())}


def _profile(update: Callable[[], Any], calls: int) -> dict[str, Any]:
    """The CUDA kernels of `calls` consecutive updates (one of each variant): how many, their summed
    GPU time, and the eight costliest by name."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            update()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type.name == "CUDA"]
    by_name: dict[str, list[float]] = {}
    for e in events:
        by_name.setdefault(e.name, []).append(e.device_time_total / 1e3)
    top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:8]
    return {"updates": calls, "kernels": len(events), "gpu_ms": sum(sum(v) for v in by_name.values()),
            "top": [{"name": name[:120], "count": len(v), "ms": sum(v)} for name, v in top]}


def _quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_learner_bench(algos: list[str], batches: list[int], device: str, num_envs: int, warmup: int, iters: int,
                      replay_rows: int, output: Path, command: list[str],
                      compile_scopes: tuple[str, ...] = ("eager",)) -> dict[str, Any]:
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise InvalidInput(f"--device {device}: not a torch device; use cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInput(f"--device {device}: CUDA is not available here; pass --device cpu")
    modes = ["eager", "captured"] if dev.type == "cuda" else ["eager"]
    results = []
    for algo in algos:
        for batch in batches:
            for scope in compile_scopes:
                for mode in modes:
                    row = bench_one(algo, batch, mode, dev, num_envs, warmup, iters, replay_rows, scope)
                    results.append(row)
                    kernels = row["kernels_per_variant_cycle"]
                    print(f"bench learner: {algo} batch {batch} compile={scope} {mode}: update "
                          f"{row['update_ms_median']:.3f} ms, inference {row['inference_ms_median']:.3f} ms "
                          f"(median of {iters})"
                          + (f", {kernels['kernels']} kernels / {kernels['gpu_ms']:.2f} ms GPU per "
                             f"{kernels['updates']} updates" if kernels else ""), flush=True)
                    write_json_atomic(output, _report(command, device, dev, warmup, iters, results))
    report = _report(command, device, dev, warmup, iters, results)
    write_json_atomic(output, report)
    return report


def _report(command: list[str], device: str, dev: torch.device, warmup: int, iters: int,
            results: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON so far: rewritten after each row, so a visit cut short keeps what it measured."""
    return {"schema_version": SCHEMA_VERSION, "command": " ".join(["soaklab", *command]), "device": device,
            "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
            "host": host_record(), "versions": versions(), "git": git_state(),
            "warmup": warmup, "iters": iters, "results": results}
