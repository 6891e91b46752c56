#!/usr/bin/env python3
"""Where the G1 env step's GPU time goes: a kernel census of each phase (issue 49's profile).

    python benchmarks/visits/2026-12-05-h100-profile/env_profile.py --num-envs 1024 \\
        --output profile_1024.json [--trace t.json]

The env on MJWarp steps with random actions, as `soaklab bench backend` does, under the torch
profiler (CUPTI: every kernel, those replayed from CUDA graphs included). Each phase of a step
(the action write, the physics graph, the task's evaluation: its two captured torch steps around
the reset graph) runs in its own window, closed by a device synchronisation, so every kernel is
assigned to the phase whose window it starts in. The synchronisations cost the profiled steps
their overlap; the phase times that count are the probe's (CUDA events, no synchronisation), which
this JSON does not replace. What it adds, per phase and per step: kernels launched, their summed
busy time against the window (the rest is launch latency and gaps), and the kernels that take the
time, grouped by name (Warp's `<function>_<hash>_cuda_kernel_forward` by function).
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.host.info import git_state, host_record, versions

PHASE_PREFIX = "phase:"
TOP_KERNELS = 25
OUTSIDE = "(outside every window)"
_WARP_KERNEL = re.compile(r"^(?P<fn>.+?)_[0-9a-f]{6,}_cuda_kernel_(forward|backward)$")


@dataclass(frozen=True)
class Span:
    """One profiled interval: a phase window (host) or a kernel (device), in microseconds."""

    name: str
    start_us: float
    end_us: float

    @property
    def us(self) -> float:
        return self.end_us - self.start_us


def kernel_group(name: str) -> tuple[str, str]:
    """(origin, group) of a device activity: Warp kernels by their function, torch's and Triton's by
    name, copies and sets as such."""
    m = _WARP_KERNEL.match(name)
    if m:
        return "warp", m.group("fn")
    lowered = name.lower()
    if lowered.startswith(("memcpy", "memset")):
        return "copy", name.split(" ")[0]
    if name.startswith("triton_"):
        return "torch", re.sub(r"_\d+$", "", name)
    return "torch", name[:120]


def census(windows: list[Span], kernels: Iterable[Span], steps: int) -> dict[str, Any]:
    """Assign each kernel to the phase window it starts in; per phase and per step: the window, the
    kernels and their busy time, and the groups that take the time. Kernels outside every window
    (the profiler's own, the warm-up's tail, or activities the profiler stamps off the host's
    clock) are grouped apart, under `outside_windows`, so nothing goes uncounted."""
    ordered = sorted(windows, key=lambda w: w.start_us)
    starts = [w.start_us for w in ordered]
    by_phase: dict[str, dict[str, Any]] = defaultdict(lambda: {"window_us": 0.0, "kernels": 0, "busy_us": 0.0,
                                                                "groups": defaultdict(lambda: [0, 0.0])})
    for w in ordered:
        by_phase[w.name]["window_us"] += w.us
    for k in kernels:
        i = bisect.bisect_right(starts, k.start_us) - 1
        inside = i >= 0 and k.start_us <= ordered[i].end_us
        phase = by_phase[ordered[i].name if inside else OUTSIDE]
        phase["kernels"] += 1
        phase["busy_us"] += k.us
        origin, group = kernel_group(k.name)
        cell = phase["groups"][f"{origin}:{group}"]
        cell[0] += 1
        cell[1] += k.us
    out: dict[str, Any] = {}
    for name, p in by_phase.items():
        top = sorted(p["groups"].items(), key=lambda kv: -kv[1][1])[:TOP_KERNELS]
        origins: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for key, (count, us) in p["groups"].items():
            origins[key.split(":", 1)[0]][0] += count
            origins[key.split(":", 1)[0]][1] += us
        out[name] = {
            "window_ms_per_step": round(p["window_us"] / steps / 1e3, 4),
            "kernels_per_step": round(p["kernels"] / steps, 1),
            "busy_ms_per_step": round(p["busy_us"] / steps / 1e3, 4),
            "busy_share_of_window": round(p["busy_us"] / p["window_us"], 3) if p["window_us"] else None,
            "by_origin": {o: {"kernels_per_step": round(c / steps, 1), "busy_ms_per_step": round(us / steps / 1e3, 4)}
                          for o, (c, us) in sorted(origins.items())},
            "top": [{"group": key, "launches_per_step": round(c / steps, 2),
                     "busy_ms_per_step": round(us / steps / 1e3, 4)} for key, (c, us) in top],
        }
    strays = out.pop(OUTSIDE, None)
    return {"phases": out, "outside_windows": strays}


def profiled_spans(prof: Any, device: str) -> tuple[list[Span], list[Span]]:
    """The phase windows (host ranges named phase:*) and the device activities of a finished
    torch profile. `device` "cuda" reads the GPU's kernels; "cpu" reads the host's aten ops as the
    activities (how the census is exercised where there is no GPU)."""
    from torch.autograd import DeviceType

    windows, kernels = [], []
    wanted = DeviceType.CUDA if device == "cuda" else DeviceType.CPU
    for ev in prof.events():
        r = ev.time_range
        if ev.name.startswith(PHASE_PREFIX):
            windows.append(Span(ev.name.removeprefix(PHASE_PREFIX), r.start, r.end))
        elif ev.device_type == wanted and (device == "cuda" or ev.name.startswith("aten::")):
            kernels.append(Span(ev.name, r.start, r.end))
    return windows, kernels


def profile_phases(phases: list[tuple[str, Callable[[], Any]]], steps: int, device: str,
                   trace: Path | None = None) -> dict[str, Any]:
    """Run `steps` steps, each phase in its own window closed by a synchronisation, under the torch
    profiler; the census of what ran."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    sync()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            for name, fn in phases:
                with record_function(PHASE_PREFIX + name):
                    fn()
                    sync()
    if trace is not None:
        prof.export_chrome_trace(str(trace))
    windows, kernels = profiled_spans(prof, device)
    return census(windows, kernels, steps)


def profile_env(num_envs: int, warmup: int, steps: int, seed: int, scene: Path, motion: Path,
                trace: Path | None) -> dict[str, Any]:
    from soaklab.config.compose import compose
    from soaklab.tasks.env import EnvSpec
    from soaklab.tasks.registry import make_env

    if not torch.cuda.is_available():
        raise InvalidInput("env_profile: needs an NVIDIA GPU (CUDA is not available here)")
    overrides = [f"algo.num_envs={num_envs}", f"env.seed={seed}", f"env.motion={json.dumps(str(motion))}"]
    run = compose("sac", "g1_motion_tracking", "mjwarp", overrides).run
    env = make_env(run, EnvSpec.of(run, "cuda"), scene)
    generator = torch.Generator(device="cuda").manual_seed(seed)
    actions = torch.zeros(num_envs, 29, device="cuda")

    def draw() -> None:
        actions.copy_(torch.rand(num_envs, 29, generator=generator, device="cuda") * 2 - 1)

    env.reset()
    for _ in range(warmup):
        draw()
        env.step(actions)
    backend = env.backend  # type: ignore[attr-defined]
    phases = [("draw_actions", draw), ("action", lambda: env.apply_action(actions)),
              ("physics", backend.step), ("task", lambda: env.evaluate(actions))]
    result = profile_phases(phases, steps, "cuda", trace)
    result.update(num_envs=num_envs, steps=steps, warmup=warmup, device=torch.cuda.get_device_name(),
                  backend_diagnostics=env.diagnostics())
    env.close()
    return result


def main(argv: list[str] | None = None) -> int:
    from soaklab.assets.record import assets_record

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=30, help="unprofiled steps first (captures, compiles)")
    parser.add_argument("--steps", type=int, default=50, help="profiled steps")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--assets-manifest", type=Path, default=Path("results/assets/manifest.json"))
    parser.add_argument("--trace", type=Path, help="also write the Chrome trace here")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        for flag, value, low in (("--num-envs", args.num_envs, 1), ("--steps", args.steps, 1),
                                 ("--warmup", args.warmup, 0)):
            if value < low:
                raise InvalidInput(f"{flag} {value}: must be >= {low}")
        assets = assets_record(args.assets_manifest)
        assert assets is not None
        result = profile_env(args.num_envs, args.warmup, args.steps, args.seed, Path(assets["scene"]),
                             Path(assets["motion"]), args.trace)
    except InvalidInput as exc:
        print(f"env_profile: error: {exc}", file=sys.stderr)
        return 2
    write_json_atomic(args.output, {"kind": "env_profile", "command": " ".join(sys.argv), "git": git_state(),
                                    "host": host_record(), "versions": versions(), **result})
    for name, p in result["phases"].items():
        print(f"env_profile: {name}: {p['window_ms_per_step']} ms window, {p['kernels_per_step']} kernels, "
              f"{p['busy_ms_per_step']} ms busy per step")
    if result["outside_windows"]:
        print(f"env_profile: outside every window: {result['outside_windows']['kernels_per_step']} kernels per step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
