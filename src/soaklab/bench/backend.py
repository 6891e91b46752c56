"""`soaklab bench backend`: the phase-local env probe and its raw physics ceiling (docs/architecture.md).

For each backend the probe runs the G1 env with random actions and times each
phase of an iteration. In the same run it measures the raw physics ceiling the env
is measured against. Which probe a backend gets follows its placement in the catalogue, never its
name. Host bridge (MuJoCo): every MjData is restored to the state the probe
started from and the recorded controls and resets are replayed through the same
MjData and thread pool with no task terms. Device resident (MJWarp): the same worlds and per-world
sizes step `decimation` plain mujoco_warp steps captured in one CUDA graph,
started from the states the env itself stepped from (each timed iteration's
qpos, qvel, solver warm start and controls are recorded and restored), since the
cost of a physics step depends on the state (contacts, solver iterations); the
free-running rate of the same graph from the env's last state is reported
beside it. Phases and ceilings are timed with CUDA events, medians.

mujoco_warp's constraint solver loops (a CUDA graph conditional) until every world
has converged or the model's iteration limit is hit, so the slowest world sets the
cost of all. The MJWarp probe reports the per-world iteration counts it saw and,
for each `--solver-caps` value, the raw ceiling replayed from the same states with
the limit lowered to it: what capping the solver (mjlab's G1 uses 10) would buy
the physics, measured, before anyone weighs what it costs the physics' fidelity.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch

from soaklab.bench.finite_cost import finite_check_cost
from soaklab.bench.timing import warp_replay_ms
from soaklab.catalogue import BACKENDS, DEVICE_RESIDENT, HOST_BRIDGE, TASKS
from soaklab.config.compose import compose
from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.host.info import git_state, host_record, versions
from soaklab.tasks.env import EnvSpec
from soaklab.tasks.registry import make_env

SCHEMA_VERSION = 1
TASK = "g1_motion_tracking"  # the env every probe steps


@dataclass(frozen=True)
class ProbeSettings:
    num_envs: int
    warmup: int
    iters: int
    threads: int | None
    seed: int
    torch_threads: int
    scene: Path
    motion: Path
    solver_caps: tuple[int, ...] = ()
    physics_variants: tuple[tuple[str, ...], ...] = ()


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def probe_host(name: str, s: ProbeSettings) -> dict[str, Any]:
    """A host-bridge backend's env, phases timed on the wall clock; then the raw ceiling: the
    recorded controls and resets replayed through the same MjData with no task."""
    overrides = [f"algo.num_envs={s.num_envs}", f"env.seed={s.seed}", f"env.motion={json.dumps(str(s.motion))}"]
    if s.threads is not None:
        overrides.append(f"env.num_threads={s.threads}")
    run = compose("sac", TASK, name, overrides).run
    env = make_env(run, EnvSpec.of(run), s.scene)
    backend = env.backend  # type: ignore[attr-defined]
    generator = torch.Generator().manual_seed(s.seed)
    env.reset()
    for _ in range(s.warmup):
        env.step(torch.rand(s.num_envs, 29, generator=generator) * 2 - 1)

    # Snapshot the physics state the measured run starts from, for the replay.
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    size = mujoco.mj_stateSize(backend.model, spec)
    snapshot = np.zeros((s.num_envs, size))
    for i, d in enumerate(backend.datas):
        mujoco.mj_getState(backend.model, d, snapshot[i], spec)

    phases: dict[str, list[float]] = {"action": [], "physics": [], "task": [], "iteration": []}
    controls, resets = [], []
    original_reset = backend.reset

    def recording_reset(env_ids, qpos, qvel, pack=True):
        resets[-1].append((env_ids.copy(), qpos.copy(), qvel.copy()))
        original_reset(env_ids, qpos, qvel, pack)

    backend.reset = recording_reset
    try:
        for _ in range(s.iters):
            resets.append([])
            actions = torch.rand(s.num_envs, 29, generator=generator) * 2 - 1
            t0 = time.perf_counter()
            env.apply_action(actions)
            t1 = time.perf_counter()
            backend.step()
            t2 = time.perf_counter()
            env.evaluate(actions)
            t3 = time.perf_counter()
            controls.append(backend.ctrl.copy())
            phases["action"].append(t1 - t0)
            phases["physics"].append(t2 - t1)
            phases["task"].append(t3 - t2)
            phases["iteration"].append(t3 - t0)
    finally:
        backend.reset = original_reset

    # Raw ceiling: same MjData and pool, same controls and resets, no task terms, nothing packed.
    for i, d in enumerate(backend.datas):
        mujoco.mj_setState(backend.model, d, snapshot[i], spec)
    raw: list[float] = []
    for ctrl, events in zip(controls, resets, strict=True):
        t0 = time.perf_counter()
        backend.ctrl[:] = ctrl
        backend.step_physics_only()
        for env_ids, qpos, qvel in events:
            backend.reset(env_ids, qpos, qvel, pack=False)
        raw.append(time.perf_counter() - t0)

    diagnostics = env.diagnostics()
    finite = finite_check_cost(env, lambda: torch.rand(s.num_envs, 29, generator=generator) * 2 - 1, s.iters)
    env.close()
    iteration_ms = _median_ms(phases["iteration"])
    raw_ms = _median_ms(raw)
    env_rate = s.num_envs / (iteration_ms / 1e3)
    ceiling = s.num_envs / (raw_ms / 1e3)
    return {
        "backend": name,
        "num_envs": s.num_envs,
        "threads": backend.num_threads,
        "decimation": backend.decimation,
        "throughput_env_control_steps_per_s": env_rate,
        "raw_physics_ceiling_env_steps_per_s": ceiling,
        "env_over_ceiling": env_rate / ceiling,
        "phases": {"iteration_ms": iteration_ms, **{f"{k}_ms": _median_ms(v) for k, v in phases.items()
                                                      if k != "iteration"}},
        "raw": {"iteration_ms": raw_ms},
        "resets_per_iteration": statistics.mean(sum(len(e[0]) for e in ev) for ev in resets),
        "backend_diagnostics": diagnostics,
        "finite_check": finite,
    }


def _cuda_ms(pairs: list[tuple[Any, Any]]) -> float:
    return statistics.median(start.elapsed_time(end) for start, end in pairs)


def solver_counts(samples: list[torch.Tensor], limit: int) -> dict[str, Any]:
    """Per-world solver iterations, one [worlds] tensor per timed step (the last substep's counts):
    how far the slowest world sits from the typical one, and how often a world ran to the limit."""
    counts = torch.stack([c.to("cpu", torch.float64) for c in samples])  # [steps, worlds]
    return {"limit": limit, "world_mean": float(counts.mean()), "world_median": float(counts.median()),
            "slowest_world_median": float(counts.max(dim=1).values.median()),
            "slowest_world_max": int(counts.max()), "at_limit_share": float((counts >= limit).double().mean())}


def probe_device(name: str, s: ProbeSettings) -> dict[str, Any]:
    """A device-resident backend's env (MJWarp: it reads mujoco_warp's Data and graphs), phases timed
    with CUDA events; then, in the same run and on the same worlds and sizes, the raw ceiling:
    `decimation` mujoco_warp steps in one CUDA graph, no task."""
    import warp as wp

    if not torch.cuda.is_available():
        raise InvalidInput(f"--backends {name}: needs an NVIDIA GPU (CUDA is not available here)")
    overrides = [f"algo.num_envs={s.num_envs}", f"env.seed={s.seed}", f"env.motion={json.dumps(str(s.motion))}"]
    run = compose("sac", TASK, name, overrides).run
    env = make_env(run, EnvSpec.of(run, "cuda"), s.scene)
    backend = env.backend  # type: ignore[attr-defined]
    generator = torch.Generator(device="cuda").manual_seed(s.seed)

    def actions() -> torch.Tensor:
        return torch.rand(s.num_envs, 29, generator=generator, device="cuda") * 2 - 1

    env.reset()
    for _ in range(s.warmup):  # includes the compile of the task terms on the first step
        env.step(actions())
    torch.cuda.synchronize()

    names = ("action", "physics", "task")
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(len(names) + 1)] for _ in range(s.iters)]
    d = backend.d
    state_views = [wp.to_torch(getattr(d, name)) for name in ("qpos", "qvel", "qacc_warmstart", "ctrl")
                   if hasattr(d, name)]
    starts: list[list[torch.Tensor]] = []
    niter = wp.to_torch(d.solver_niter)
    seen: list[torch.Tensor] = []
    wall = time.perf_counter()
    for marks in events:
        a = actions()
        starts.append([v.clone() for v in state_views])  # outside the timed span
        marks[0].record()
        env.apply_action(a)
        marks[1].record()
        backend.step()
        marks[2].record()
        env.evaluate(a)
        marks[3].record()
        seen.append(niter.clone())  # outside the timed span, in stream order after the step
    torch.cuda.synchronize()
    wall_s = (time.perf_counter() - wall) / s.iters
    phases = {f"{n}_ms": _cuda_ms([(m[i], m[i + 1]) for m in events]) for i, n in enumerate(names)}
    iteration_ms = _cuda_ms([(m[0], m[-1]) for m in events])
    overflow = backend.overflow_worlds()

    # Raw ceiling: the same Data (worlds, nconmax, njmax), plain steps captured in one graph.
    with wp.ScopedDevice(backend.wp_device), wp.ScopedStream(backend.stream):
        with wp.ScopedCapture() as capture:
            backend._physics_ops()
        free_ms = statistics.median(warp_replay_ms(capture.graph, s.iters))

    def replayed(graph: Any) -> tuple[float, list[torch.Tensor]]:
        """The graph from each state the env stepped from (restored on torch's stream): median ms."""
        pairs, counts = [], []
        for start in starts:
            for view, saved in zip(state_views, start, strict=True):
                view.copy_(saved)
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            backend._launch(None, graph)
            end.record()
            pairs.append((begin, end))
            counts.append(niter.clone())
        torch.cuda.synchronize()
        return _cuda_ms(pairs), counts

    raw_ms, _ = replayed(capture.graph)
    diagnostics = env.diagnostics()  # before the capped replays, whose worlds set ITERATIONS overflow bits
    limit = int(backend.m.opt.iterations)
    capped = []
    for cap in s.solver_caps:
        # The limit is a launch argument of the solver's iteration kernel, read when a graph is
        # captured: lowering it needs no new kernels, only a new capture. Worlds that reach it set
        # mujoco_warp's ITERATIONS overflow bit (and print), which nothing here reads.
        backend.m.opt.iterations = cap
        with wp.ScopedDevice(backend.wp_device), wp.ScopedStream(backend.stream):
            with wp.ScopedCapture() as capped_capture:
                backend._physics_ops()
        cap_ms, cap_counts = replayed(capped_capture.graph)
        capped.append({"solver_iterations": cap, "iteration_ms": cap_ms,
                       "env_steps_per_s": s.num_envs / (cap_ms / 1e3),
                       "solver": solver_counts(cap_counts, cap)})
    backend.m.opt.iterations = limit
    variants = [physics_variant(backend, changes, replayed) for changes in s.physics_variants]
    finite = finite_check_cost(env, actions, s.iters)
    env.close()
    env_rate = s.num_envs / (iteration_ms / 1e3)
    ceiling = s.num_envs / (raw_ms / 1e3)
    return {
        "backend": name,
        "num_envs": s.num_envs,
        "decimation": backend.decimation,
        "nconmax": backend.nconmax,
        "njmax": backend.njmax,
        "device": torch.cuda.get_device_name(),
        "throughput_env_control_steps_per_s": env_rate,
        "wall_clock_env_steps_per_s": s.num_envs / wall_s,
        "raw_physics_ceiling_env_steps_per_s": ceiling,
        "raw_physics_steps_per_s": ceiling * backend.decimation,
        "env_over_ceiling": env_rate / ceiling,
        "phases": {"iteration_ms": iteration_ms, **phases},
        "raw": {"iteration_ms": raw_ms, "from": "the env's own states (replayed)",
                "free_running_iteration_ms": free_ms,
                "free_running_env_steps_per_s": s.num_envs / (free_ms / 1e3)},
        "solver": {**solver_counts(seen, limit), "ls_limit": int(backend.m.opt.ls_iterations),
                   "tolerance": float(backend.model.opt.tolerance)},
        "raw_capped": capped,
        "raw_variants": variants,
        "overflow_worlds": overflow,
        "backend_diagnostics": diagnostics,
        "finite_check": finite,
    }


def parse_physics_variants(text: str) -> tuple[tuple[str, ...], ...]:
    """`opt.a=x,opt.b=y;opt.c=z`: each `;`-separated group is one variant, its `,`-separated
    changes are mujoco_warp Option overrides (mujoco_warp's own override syntax). Checked against
    the Option fields before anything runs. No variant asked for needs no mujoco_warp: a probe of the
    CPU backend alone runs without the warp extra."""
    import dataclasses

    groups = [g.strip() for g in text.split(";") if g.strip()]
    if not groups:
        return ()
    try:
        import mujoco_warp as mjw
    except ImportError:
        raise InvalidInput("--physics-variants: needs mujoco_warp (the warp extra)") from None
    fields = {f.name for f in dataclasses.fields(mjw.Option)}
    variants = []
    for group in groups:
        changes = tuple(c.strip() for c in group.split(",") if c.strip())
        for change in changes:
            key, sep, value = change.partition("=")
            if not sep or not value.strip() or not key.strip().startswith("opt.") \
                    or key.strip().removeprefix("opt.") not in fields:
                raise InvalidInput(f"--physics-variants {change!r}: expected opt.<field>=<value>, a mujoco_warp "
                                   f"Option field (e.g. opt.solver=CG, opt.broadphase=SAP_TILE)")
        variants.append(changes)
    return tuple(variants)


@contextlib.contextmanager
def physics_options(model: Any, changes: tuple[str, ...]) -> Iterator[None]:
    """`changes` applied to a mujoco_warp Model's options (mujoco_warp's own override parser: its
    enum names, booleans and per-world arrays), the previous values put back on the way out."""
    # override_model is mujoco_warp's parser of `opt.<field>=<value>` (its test and benchmark
    # tools use it); 4.0.0 does not re-export it at the top level.
    from mujoco_warp._src.io import override_model

    opt = model.opt
    saved = {key: getattr(opt, key) for key in (c.partition("=")[0].strip().removeprefix("opt.") for c in changes)}
    try:
        override_model(model, list(changes))
        yield
    finally:
        for name, value in saved.items():
            setattr(opt, name, value)


def physics_variant(backend: Any, changes: tuple[str, ...], replayed: Any) -> dict[str, Any]:
    """The raw ceiling replayed from the env's states under `changes` to the physics options. A
    change of kernels (a solver, a broadphase) loads them eagerly first: a module is never compiled
    inside a capture."""
    import warp as wp

    try:
        with physics_options(backend.m, changes):
            with wp.ScopedDevice(backend.wp_device), wp.ScopedStream(backend.stream):
                backend._physics_ops()
                with wp.ScopedCapture() as capture:
                    backend._physics_ops()
            ms, counts = replayed(capture.graph)
            limit = int(backend.m.opt.iterations)
        return {"changes": list(changes), "iteration_ms": ms, "env_steps_per_s": backend.num_envs / (ms / 1e3),
                "solver": solver_counts(counts, limit)}
    except Exception as exc:  # one variant that mujoco_warp refuses leaves the others measured
        return {"changes": list(changes), "error": f"{type(exc).__name__}: {exc}"}


# Each probe times what its placement keeps where (soaklab.catalogue): the host's MjData or the device's.
PROBES = {HOST_BRIDGE: probe_host, DEVICE_RESIDENT: probe_device}


def run_probe(backends: list[str], settings: ProbeSettings, output: Path, argv: list[str]) -> dict[str, Any]:
    valid = TASKS[TASK].backends
    unknown = [b for b in backends if b not in valid]
    if unknown:
        raise InvalidInput(f"--backends {unknown[0]}: unknown backend; valid: {', '.join(valid)}")
    on_device = [b for b in backends if BACKENDS[b].placement == DEVICE_RESIDENT]
    device_names = " or ".join(b for b in valid if BACKENDS[b].placement == DEVICE_RESIDENT)
    for flag, value in (("--num-envs", settings.num_envs), ("--iters", settings.iters)):
        if value < 1:
            raise InvalidInput(f"{flag} {value}: must be >= 1")
    if settings.warmup < 0:
        raise InvalidInput(f"--warmup {settings.warmup}: must be >= 0")
    if settings.torch_threads < 1:
        raise InvalidInput(f"--torch-threads {settings.torch_threads}: must be >= 1")
    torch.set_num_threads(settings.torch_threads)
    bad_caps = [c for c in settings.solver_caps if c < 1]
    if bad_caps:
        raise InvalidInput(f"--solver-caps {bad_caps[0]}: each cap must be >= 1 solver iteration")
    if settings.solver_caps and not on_device:
        raise InvalidInput(f"--solver-caps: measured on the MJWarp ceiling only; add --backends {device_names}")
    if settings.physics_variants and not on_device:
        raise InvalidInput(f"--physics-variants: measured on the MJWarp ceiling only; add --backends {device_names}")
    if settings.threads is not None and settings.threads < 1:
        raise InvalidInput(f"--threads {settings.threads}: must be >= 1")
    if on_device and not torch.cuda.is_available():
        raise InvalidInput(f"--backends {on_device[0]}: needs an NVIDIA GPU (CUDA is not available here)")
    results = []
    for backend in backends:
        print(f"bench: {backend} {settings.num_envs} envs, {settings.warmup} warmup + {settings.iters} iterations",
              flush=True)
        result = PROBES[BACKENDS[backend].placement](backend, settings)
        results.append(result)
        print(f"bench: {backend}: {result['throughput_env_control_steps_per_s']:.0f} env-steps/s, raw ceiling "
              f"{result['raw_physics_ceiling_env_steps_per_s']:.0f} ({result['env_over_ceiling']:.1%}); finiteness "
              f"check {result['finite_check']['fused_share_of_step']:.2%} of a step", flush=True)
    record = {
        "schema_version": SCHEMA_VERSION,
        "kind": "backend_probe",
        "command": " ".join(["soaklab", *argv]),
        "host": host_record(),
        "versions": versions(),
        "git": git_state(),
        "torch_threads": torch.get_num_threads(),
        "settings": {"num_envs": settings.num_envs, "warmup": settings.warmup, "iters": settings.iters,
                     "threads": settings.threads, "seed": settings.seed,
                     "solver_caps": list(settings.solver_caps),
                     "physics_variants": [list(v) for v in settings.physics_variants]},
        "results": results,
    }
    write_json_atomic(output, record)
    return record

