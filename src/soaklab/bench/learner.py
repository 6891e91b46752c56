"""`soaklab bench learner`: one learner update (and one inference), eager against captured.

For each agent and batch size the benchmark builds the agent with the G1
tracking task's widths and the owner's defaults, fills a replay ring with
random transitions, runs `--warmup` updates (which include the capture), then
times `--iters` single updates, each between two CUDA events on the learner's
stream (host wall time on a CPU), and reports medians. Inference (the exploring
actor forward for `--num-envs` observations) is timed the same way. Eager runs
set SOAKLAB_LEARNER_CUDA_GRAPH=0 for the agent they build.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from soaklab.capture import GRAPH_ENV
from soaklab.config.compose import compose
from soaklab.hostinfo import git_state, host_record, versions
from soaklab.jsonfiles import write_json_atomic
from soaklab.rl.agents import make_agent
from soaklab.rl.replay import ReplayRing
from soaklab.settings.layout import Layout
from soaklab.tasks.spaces import TASK_SPACES

SCHEMA_VERSION = 1


def _time_ms(fn: Callable[[], Any], iters: int, device: torch.device) -> list[float]:
    out = []
    for _ in range(iters):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def bench_one(algo: str, batch: int, mode: str, device: torch.device, num_envs: int, warmup: int,
              iters: int, replay_rows: int) -> dict[str, Any]:
    spaces = TASK_SPACES["g1_motion_tracking"]
    config = compose(algo, "g1_motion_tracking", "mujoco", [f"algo.batch_size={batch}"]).config
    previous = os.environ.get(GRAPH_ENV)
    os.environ[GRAPH_ENV] = "1" if mode == "captured" else "0"
    try:
        agent = make_agent(algo, spaces.actor_obs, spaces.critic_obs, spaces.action, num_envs, config["algo"], device)
    finally:
        if previous is None:
            os.environ.pop(GRAPH_ENV, None)
        else:
            os.environ[GRAPH_ENV] = previous
    layout = Layout(spaces=spaces, num_envs=num_envs, capacity=1, depth=2, slot_rows=num_envs, num_metrics=1)
    replay = ReplayRing(replay_rows, layout.row_width, layout.row_slices(), device, seed=0)
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
    update_ms = _time_ms(update, iters, device)
    inference_ms = _time_ms(inference, iters, device)
    diagnostics = agent.capture_diagnostics()
    agent.close()
    return {"algo": algo, "batch_size": batch, "mode": mode, "num_envs": num_envs,
            "update_ms_median": statistics.median(update_ms), "update_ms_p90": _quantile(update_ms, 0.9),
            "inference_ms_median": statistics.median(inference_ms),
            "updates_timed": iters, "cuda_graph": {k: v for k, v in diagnostics.items() if k != "steps"},
            "finite_diagnostics": bool(torch.isfinite(agent.diagnostics).all())}


def _quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_learner_bench(algos: list[str], batches: list[int], device: str, num_envs: int, warmup: int, iters: int,
                      replay_rows: int, output: Path, command: list[str]) -> dict[str, Any]:
    dev = torch.device(device)
    modes = ["eager", "captured"] if dev.type == "cuda" else ["eager"]
    results = []
    for algo in algos:
        for batch in batches:
            for mode in modes:
                row = bench_one(algo, batch, mode, dev, num_envs, warmup, iters, replay_rows)
                results.append(row)
                print(f"bench learner: {algo} batch {batch} {mode}: update {row['update_ms_median']:.3f} ms, "
                      f"inference {row['inference_ms_median']:.3f} ms (median of {iters})", flush=True)
    report = {"schema_version": SCHEMA_VERSION, "command": " ".join(["soaklab", *command]), "device": device,
              "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
              "host": host_record(), "versions": versions(), "git": git_state(),
              "warmup": warmup, "iters": iters, "results": results}
    write_json_atomic(output, report)
    return report
