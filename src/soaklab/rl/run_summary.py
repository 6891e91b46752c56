"""run_summary.json with the runtime manifest v1 (docs/runtime.md), checked against its schema."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from soaklab.contract.layout import Layout
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.metrics.tags import METRIC_SCHEMA_VERSION
from soaklab.rl.channels import C
from soaklab.rl.resume import event_gaps
from soaklab.rl.shutdown import Shutdown
from soaklab.schemas import validate_artifact

if TYPE_CHECKING:
    from soaklab.config.run_config import ResolvedRun

MANIFEST_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class LearnerOutcome:
    """How one rank's run ended, as the learner hands it over: values read once at the end, so the
    summary depends on what a run produced, never on the learner object that produced it."""

    resolved: ResolvedRun
    rank_index: int
    parallel: bool  # one of several data-parallel ranks
    device: torch.device
    shutdown: dict[str, Any]  # Shutdown.record(): classification, owner, exception, collector, cleanup
    iteration: int
    env_steps: int
    final_fps: float
    wall_time_s: float
    backend_diagnostics: dict[str, Any] | None
    learner_diagnostics: dict[str, Any] | None
    cuda_process_sharing: dict[str, Any] | None
    rank_records: list[dict[str, Any]] | None = None  # rank 0: every rank's device and GPU
    peer_reports: list[dict[str, Any] | None] | None = None  # rank 0: how ranks 1..N-1 ended
    dp_warmed_up: bool = False
    segments: list[dict[str, Any]] | None = None  # the run's segments, one per start or resume (soaklab.rl.resume)
    loggers: dict[str, Any] | None = None  # rank 0: each logger's state (RunLogger.states), read once closed


def _counters(counters: np.ndarray | None) -> dict[C, int]:
    return {c: (int(counters[c]) if counters is not None else 0) for c in C if c != C.COUNT}


def inference_flight(n: dict[C, int], capacity: int) -> dict[str, int]:
    in_flight = n[C.TICKS_PUBLISHED] - n[C.TICKS_ANSWERED]
    return {
        "capacity": capacity,
        "ticks_published": n[C.TICKS_PUBLISHED],
        "ticks_answered": n[C.TICKS_ANSWERED],
        "queue_depth": in_flight,
        "in_flight": in_flight,
        "publication_lag": n[C.TICKS_ANSWERED] - n[C.TICKS_CONSUMED],
        "max_in_flight": n[C.MAX_IN_FLIGHT],
        "max_publication_lag": n[C.MAX_PUBLICATION_LAG],
    }


def replay_ingress(n: dict[C, int], layout: Layout) -> dict[str, Any]:
    return {
        "ingress_depth": layout.depth,
        "ingress_slot_rows": layout.slot_rows,
        "chunks_per_vector": layout.chunks_per_vector,
        "vector_steps": n[C.VECTOR_STEPS],
        "published_sequence": n[C.INGRESS_PUBLISHED],
        "release_sequence": n[C.INGRESS_RELEASED],
        "occupancy": n[C.INGRESS_PUBLISHED] - n[C.INGRESS_RELEASED],
        "high_water_occupancy": n[C.HIGH_WATER],
        "backpressure_waits": n[C.BACKPRESSURE_WAITS],
        "backpressure_wait_s": n[C.BACKPRESSURE_WAIT_NS] / 1e9,
        "early_returns": n[C.EARLY_RETURNS],
        "dropped_batches": n[C.DROPPED_BATCHES],
        "closed_returns": n[C.CLOSED_RETURNS],
        "stop_returns": n[C.STOP_RETURNS],
    }


def measured_peaks(outcome: LearnerOutcome, n: dict[C, int]) -> dict[str, int | None]:
    """torch's peak reservations beside the budget (mujoco_warp's own arrays are not torch's)."""
    device = outcome.device
    on_cuda = device.type == "cuda"
    return {
        "learner_cuda": int(torch.cuda.max_memory_reserved(device)) if on_cuda else None,
        "collector_cuda": n[C.COLLECTOR_CUDA_PEAK] if outcome.resolved.devices.carrier.startswith("cuda") else None,
    }


def build_rank_report(outcome: LearnerOutcome, counters: np.ndarray | None) -> dict[str, Any]:
    """How a rank other than 0 ended, sent to rank 0 (which writes the run's only summary)."""
    n = _counters(counters)
    return {"rank": outcome.rank_index, "shutdown": outcome.shutdown, "iteration": outcome.iteration,
            "env_steps": outcome.env_steps, "final_env_steps_per_sec": outcome.final_fps,
            "dropped_batches": n[C.DROPPED_BATCHES], "backend_diagnostics": outcome.backend_diagnostics,
            "learner_diagnostics": outcome.learner_diagnostics}


def data_parallel(outcome: LearnerOutcome) -> dict[str, Any]:
    """The manifest's rank evidence: the group, the sync, and each rank's placement and end."""
    from soaklab.rl.dp import NCCL_DEFAULTS

    plan = outcome.resolved.ranks
    reports = outcome.peer_reports or []
    ranks = []
    for index, record in enumerate(outcome.rank_records or []):
        report = None if index == 0 else (reports[index - 1] if index - 1 < len(reports) else None)
        shutdown = outcome.shutdown if index == 0 else (report or {}).get("shutdown")
        ranks.append(record | {
            "classification": shutdown["classification"] if shutdown else "learner_failure",
            "iteration": outcome.iteration if index == 0 else (report or {}).get("iteration"),
            "env_steps": outcome.env_steps if index == 0 else (report or {}).get("env_steps"),
            "reported": index == 0 or report is not None,
            "collector_pid": ((shutdown or {}).get("collector") or {}).get("pid"),
        })
    graphs = (outcome.learner_diagnostics or {}).get("cuda_graph") or {}
    update_steps = {k: v for k, v in (graphs.get("steps") or {}).items() if k.startswith("update_")}
    captured = bool(update_steps) and all(v["enabled"] for v in update_steps.values())
    warmed = outcome.dp_warmed_up
    return {
        "world_size": plan.world_size,
        "backend": plan.backend,
        "launcher": "torch.multiprocessing (spawn) from rank 0",
        "rendezvous": "FileStore in the run dir",
        "nccl_environment": {k: os.environ.get(k) for k in NCCL_DEFAULTS} if plan.backend == "nccl" else None,
        "dp_sync": {
            "initial_broadcast": "actor, critics, targets, temperature, normalisers (rank 0)",
            "gradient_all_reduce": "flat buffer per module, SUM / world_size, before every optimizer step",
            "replay_exchange": False,
            "cuda_graph_optimizer_capture": ("enabled_after_collective_warmup" if captured and warmed
                                             else "enabled" if captured else "eager"),
            "cuda_graph_collective_warmup": warmed,
        },
        "ranks": ranks,
    }


def build_summary(outcome: LearnerOutcome, counters: np.ndarray | None) -> dict[str, Any]:
    r = outcome.resolved
    s = r.settings
    n = _counters(counters)
    completed = outcome.shutdown["classification"] == "normal_completion"
    budget = r.budget.as_record()
    budget["measured_peak_bytes"] = measured_peaks(outcome, n)
    manifest: dict[str, Any] = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "runtime_limits": s.runtime_limits(),
        "inference_memory_budget": {"bytes": budget["parts_bytes"]["inference_ring"], "device": r.devices.carrier,
                                    "transport": r.devices.inference_transport},
        "tensor_memory_budget": budget,
        "collector_backend_device": r.devices.carrier,
        "inference_flight": inference_flight(n, s.inference_slot_capacity),
        "replay_ingress": replay_ingress(n, r.layout),
        "shutdown": outcome.shutdown,
        "backend_diagnostics": outcome.backend_diagnostics or {
            "available": False, "backend_type": r.composed.sim, "unavailable_reason": "not reported"},
    }
    if outcome.learner_diagnostics is not None:
        manifest["learner_diagnostics"] = outcome.learner_diagnostics
    env_steps, fps = outcome.env_steps, outcome.final_fps
    if outcome.parallel:
        manifest["data_parallel"] = data_parallel(outcome)
        for report in outcome.peer_reports or []:  # the aggregate: every collector's env steps
            if report is not None:
                env_steps += report["env_steps"]
                fps += report["final_env_steps_per_sec"]
    if outcome.cuda_process_sharing is not None:
        manifest["cuda_process_sharing"] = outcome.cuda_process_sharing
    elif r.run.training.cuda_process_sharing is not None:  # failed before the evidence was taken
        manifest["cuda_process_sharing"] = {"configured": r.run.training.cuda_process_sharing, "effective": None,
                                            "validated": False}
    exc = outcome.shutdown["exception"]
    return {
        "schema_version": 1,
        "status": "completed" if completed else "failed",
        "stop_reason": outcome.shutdown["stop_reason"],  # max_iterations or time_budget; null when failed
        "failure_reason": None if completed else (
            f"{outcome.shutdown['classification']}: {exc['type']}: {exc['message']}" if exc
            else outcome.shutdown["classification"]),
        "algo": r.composed.algo,
        "task": r.composed.task,
        "sim": r.composed.sim,
        # What the support matrix's `covers` markers are checked against (tests/conftest.py).
        "learner_device": r.devices.learner,
        "ranks": r.ranks.world_size,
        "config_hash": r.record()["config_hash"],
        "completed_iterations": outcome.iteration,
        "total_env_steps": env_steps,
        "final_env_steps_per_sec": fps,
        "training_wall_time_sec": outcome.wall_time_s,
        "metric_schema_version": METRIC_SCHEMA_VERSION,
        "segments": outcome.segments or [],
        # Rows a resume could not carry (damaged event records): what `soaklab validate` accepts as missing.
        "event_gaps": event_gaps(outcome.segments or []),
        "loggers": outcome.loggers or {},
        "runtime_manifest": manifest,
    }


def validate_summary(summary: dict[str, Any]) -> None:
    validate_artifact("run_summary", summary)


def write_summary(run_dir: Path, outcome: LearnerOutcome, counters: np.ndarray | None, shutdown: Shutdown
                  ) -> tuple[dict[str, Any], str | None]:
    """Rank 0's run_summary.json: built, validated (a failed check is a cleanup error of `shutdown`) and
    written. The summary, and why it could not be written (e.g. a full disk: said in one line; the
    caller still gets the summary)."""
    summary = build_summary(outcome, counters)
    shutdown.step("validate run summary", lambda: validate_summary(summary))
    summary["runtime_manifest"]["shutdown"]["cleanup"]["errors"] = list(shutdown.cleanup_errors)
    try:
        write_json_atomic(run_dir / "run_summary.json", summary)
    except OSError as exc:
        error = f"cannot write {run_dir / 'run_summary.json'}: {exc.strerror or exc}"
        print(f"train: error: {error}", file=sys.stderr, flush=True)
        return summary, error
    return summary, None
