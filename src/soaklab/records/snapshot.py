"""What a record keeps of one finished run, and what a reproduce reads back the same way.

A snapshot is read from the run's DAG outputs (results/<run>/: soak.json, validation.json,
run_config.json and the run dir's event file and final checkpoint): the deterministic series, the
final weights' digest, the validation checks, the record's figures, the soak's verdict, and the
machine and versions it ran on. The record and its reproduction are both snapshots, so the two
sides of a comparison are read by one function.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pandas as pd

from soaklab.catalogue import BACKENDS, compared_versions
from soaklab.config.run_config import recorded_run
from soaklab.errors import InvalidInput
from soaklab.files.checkpoints import load_weights
from soaklab.files.jsonfiles import read_json
from soaklab.metrics.events import event_file, read_events
from soaklab.metrics.lumps import accumulated_per_iteration
from soaklab.metrics.tags import ACCUMULATED_TAGS
from soaklab.records.plan import DETERMINISTIC_KIND, LEARNING, TIMING, Figure, Record, RecordRun, numerics
from soaklab.soak.criteria import row_passed

SNAPSHOT_VERSION = 1
# The deterministic series: what the CPU reproducibility test compares bit for bit.
EXACT_PREFIXES = ("Train/", "Loss/")
# Logged iterations averaged into a learning figure (at 1024 envs, 0.2 M env steps before the count).
LEARNING_WINDOW = 200
# Versions that decide whether two runs can be compared at all (python by major.minor): python and
# every backend's `versions` (soaklab.catalogue; the built-ins': python, torch, mujoco, warp, mujoco_warp).
COMPARED_VERSIONS = compared_versions()
# What a run's figures can depend on, by its sim: a MuJoCo run never imports warp, so whether warp is
# installed beside it (the CPU set-up has it, for sim-to-sim evaluation) says nothing about them; its
# floats are torch's and MuJoCo's kernels', not the interpreter's (docs/records.md, "Numerics profiles").
SIM_VERSIONS = {name: backend.versions for name, backend in BACKENDS.items()}  # soaklab.catalogue


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = read_json(path)
    except FileNotFoundError:
        raise InvalidInput(f"{path}: missing; the run has not finished through validate_artifacts") from None
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path}: unreadable ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{path}: expected a JSON object")
    return value


def weights_digest(checkpoint: Path) -> str:
    """sha256 over every tensor of the agent (name, dtype, shape, bytes, in name order): the same
    weights give the same digest whatever the pickle around them holds."""
    import torch

    if not checkpoint.is_file():
        raise InvalidInput(f"{checkpoint}: missing; the run wrote no final checkpoint")
    state = load_weights(checkpoint)
    digest = hashlib.sha256()

    def walk(tree: Any, prefix: str) -> None:
        if isinstance(tree, dict):
            for key in sorted(tree, key=str):
                walk(tree[key], f"{prefix}/{key}")
        elif isinstance(tree, torch.Tensor):
            tensor = tree.detach().contiguous().cpu()
            digest.update(f"{prefix}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")

    walk(state["agent"], "")
    return "sha256:" + digest.hexdigest()


def machine_kind(context: dict[str, Any], machine: str) -> str:
    """The kind of machine a run's figures belong to: the GPUs (name and count) for a gpu record; for
    a cpu run under a numerics profile, the arithmetic it ran (soaklab.host.numerics.machine_kind),
    which any x86-64 host with the instruction set reproduces; for a cpu run without one, the CPU
    model, its usable cores and the instruction set torch's kernels dispatch to."""
    if machine == "gpu":
        gpus = context.get("gpus") or []
        names = sorted({g.get("name", "?") for g in gpus})
        kind = f"gpu: {' + '.join(names) or 'none'} x{len(gpus)}"
        if (context.get("determinism") or {}).get("enabled"):
            # training.deterministic: bit for bit on this GPU model, driver and CUDA (docs/determinism.md)
            drivers = sorted({str(g.get("driver", "?")) for g in gpus}) or ["?"]
            cuda = context["determinism"].get("cuda") or "?"
            kind += f", driver {' + '.join(drivers)}, CUDA {cuda}{DETERMINISTIC_KIND}"
        return kind
    host = context.get("host") or {}
    if context.get("numerics"):
        return numerics.machine_kind(context["numerics"], host)
    kind = f"cpu: {host.get('cpu_model', '?')} x{host.get('cores', '?')}"
    # A soak JSON from before the capability was recorded keeps the kind its record was filed under.
    return f"{kind}, {host['cpu_capability']}" if host.get("cpu_capability") else kind


def compared_versions(context: dict[str, Any], sim: str) -> dict[str, str | None]:
    """The versions a run of `sim` is compared on (SIM_VERSIONS; every one for a sim not named)."""
    found = context.get("versions") or {}
    out = {name: found.get(name) for name in SIM_VERSIONS.get(sim, COMPARED_VERSIONS)}
    if out.get("python"):
        out["python"] = ".".join(str(out["python"]).split(".")[:2])
    return out


def _steady(frame: pd.DataFrame, tag: str) -> float | None:
    """A Perf/ series over the second half of the run's logged iterations (the first half holds
    compilation, graph capture and the replay filling up): its median, or for the collector's
    lump-logged phase times (ACCUMULATED_TAGS) the time per iteration."""
    points = frame[frame["tag"] == tag]
    if points.empty:
        return None
    steady = points[points["step"] >= points["step"].max() // 2]
    if tag in ACCUMULATED_TAGS:
        return accumulated_per_iteration(steady)
    return float(steady["value"].median())


def _learning_value(frame: pd.DataFrame, tag: str, at_env_steps: int, env_steps_per_iteration: int) -> float | None:
    """The mean of the last LEARNING_WINDOW logged points whose iteration ended at or before
    `at_env_steps` (iteration i ends at (i + 1) x env steps per iteration)."""
    points = frame[(frame["tag"] == tag) & ((frame["step"] + 1) * env_steps_per_iteration <= at_env_steps)]
    if points.empty:
        return None
    return float(points.sort_values("step")["value"].tail(LEARNING_WINDOW).mean())


def figure_value(frame: pd.DataFrame, figure: Figure, env_steps_per_iteration: int) -> float | None:
    if figure.name in TIMING:
        return _steady(frame, TIMING[figure.name])
    assert figure.at_env_steps is not None
    return _learning_value(frame, LEARNING[figure.name][0], figure.at_env_steps, env_steps_per_iteration)


def exact_series(frame: pd.DataFrame) -> dict[str, list[list[float]]]:
    """Every Train/ and Loss/ series as [step, value] pairs (values exact: JSON floats round-trip)."""
    series: dict[str, list[list[float]]] = {}
    for tag, points in frame[frame["tag"].str.startswith(EXACT_PREFIXES)].groupby("tag", sort=True):
        ordered = points.sort_values("step", kind="stable")
        series[str(tag)] = [[int(s), float(v)] for s, v in zip(ordered["step"], ordered["value"], strict=True)]
    return series


def take(record: Record, run: RecordRun, results: Path) -> dict[str, Any]:
    """The snapshot of one seed's run from its DAG outputs under `results`."""
    base = results / run.name
    soak = _read_json(base / "soak.json")
    validation = _read_json(base / "validation.json")
    run_config = _read_json(base / "run_config.json")
    train = base / "train"
    frame, _identity = read_events(event_file(train))
    ranks = (((run_config.get("run") or {}).get("data_parallel") or {}).get("ranks") or {}).get("resolved") or 1
    per_iteration = recorded_run(base / "run_config.json", run_config).algo.num_envs * int(ranks)
    figures = {f.key: figure_value(frame, f, per_iteration)
               for f in (*record.figures, *(t.figure for t in record.thresholds))}
    verdict = (soak.get("resource_summary") or {}).get("leak_verdict") or {}
    context = soak.get("context") or {}
    return {
        "snapshot_version": SNAPSHOT_VERSION,
        "record": record.name,
        "run": run.name,
        "seed": run.seed,
        "config_hash": run_config.get("config_hash"),
        # What the run was asked for beyond the owner defaults (the DAG's own log dir aside).
        "overrides": {k: v for k, v in (run_config.get("overrides") or {}).items() if k != "training.log_dir"},
        "env_steps_per_iteration": per_iteration,
        "iterations": int(frame[frame["tag"] == "Perf/iteration_ms"]["step"].max() + 1)
        if (frame["tag"] == "Perf/iteration_ms").any() else 0,
        "machine_kind": machine_kind(context, record.machine),
        # why this host could not run the record's numerics profile (None: it could, or none was asked)
        "host_lacks": (context.get("numerics") or {}).get("host_lacks"),
        "versions": compared_versions(context, str(run_config.get("sim"))),
        "commit": context.get("soaklab_commit"),
        "dirty": context.get("soaklab_dirty"),
        "soak": {"status": soak.get("status"), "classification": soak.get("failure_classification"),
                 "duration_s": soak.get("duration_s"), "leak_status": verdict.get("status")},
        # each check judged again from its expected and actual values, not its `passed` field
        "validation": [[c["name"], row_passed(c)] for c in validation.get("checks", [])],
        "figures": figures,
        "weights_sha256": weights_digest(train / "checkpoints" / "model_final.pt") if record.exact else None,
        "series": exact_series(frame) if record.exact else None,
    }
