"""run_summary.json with the runtime manifest v1 (docs/runtime.md), checked against its schema."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from soaklab.metrics.tags import METRIC_SCHEMA_VERSION
from soaklab.rl.channels import C
from soaklab.schemas import validate_artifact
from soaklab.settings.layout import Layout

if TYPE_CHECKING:
    from soaklab.rl.runner import Learner

MANIFEST_SCHEMA_VERSION = 1


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


def measured_peaks(learner: Learner, n: dict[C, int]) -> dict[str, int | None]:
    """torch's peak reservations beside the budget (mujoco_warp's own arrays are not torch's)."""
    device = learner.device
    on_cuda = device.type == "cuda"
    return {
        "learner_cuda": int(torch.cuda.max_memory_reserved(device)) if on_cuda else None,
        "collector_cuda": n[C.COLLECTOR_CUDA_PEAK] if learner.resolved.devices.carrier.startswith("cuda") else None,
    }


def build_rank_report(learner: Learner, counters: np.ndarray | None) -> dict[str, Any]:
    """How a rank other than 0 ended, sent to rank 0 (which writes the run's only summary)."""
    n = _counters(counters)
    return {"rank": learner.rank_index, "shutdown": learner.shutdown.record(), "iteration": learner.iteration,
            "env_steps": learner.env_steps, "final_env_steps_per_sec": learner.final_fps,
            "dropped_batches": n[C.DROPPED_BATCHES], "backend_diagnostics": learner.backend_diagnostics,
            "learner_diagnostics": learner.learner_diagnostics}


def data_parallel(learner: Learner) -> dict[str, Any]:
    """The manifest's rank evidence: the group, the sync, and each rank's placement and end."""
    from soaklab.rl.dp import NCCL_DEFAULTS

    plan, dp = learner.resolved.ranks, learner.dp
    reports = learner.peer_reports or []
    ranks = []
    for index, record in enumerate(learner.rank_records or []):
        report = None if index == 0 else (reports[index - 1] if index - 1 < len(reports) else None)
        shutdown = learner.shutdown.record() if index == 0 else (report or {}).get("shutdown")
        ranks.append(record | {
            "classification": shutdown["classification"] if shutdown else "learner_failure",
            "iteration": learner.iteration if index == 0 else (report or {}).get("iteration"),
            "env_steps": learner.env_steps if index == 0 else (report or {}).get("env_steps"),
            "reported": index == 0 or report is not None,
            "collector_pid": ((shutdown or {}).get("collector") or {}).get("pid"),
        })
    graphs = (learner.learner_diagnostics or {}).get("cuda_graph") or {}
    update_steps = {k: v for k, v in (graphs.get("steps") or {}).items() if k.startswith("update_")}
    captured = bool(update_steps) and all(v["enabled"] for v in update_steps.values())
    warmed = bool(dp is not None and dp.warmed_up)
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


def build_summary(learner: Learner, counters: np.ndarray | None) -> dict[str, Any]:
    r, s = learner.resolved, learner.settings
    n = _counters(counters)
    completed = learner.shutdown.classification == "normal_completion"
    budget = r.budget.as_record()
    budget["measured_peak_bytes"] = measured_peaks(learner, n)
    manifest: dict[str, Any] = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "runtime_limits": s.runtime_limits(),
        "inference_memory_budget": {"bytes": budget["parts_bytes"]["inference_ring"], "device": r.devices.carrier,
                                    "transport": r.devices.inference_transport},
        "tensor_memory_budget": budget,
        "collector_backend_device": r.devices.carrier,
        "inference_flight": inference_flight(n, s.inference_slot_capacity),
        "replay_ingress": replay_ingress(n, r.layout),
        "shutdown": learner.shutdown.record(),
        "backend_diagnostics": learner.backend_diagnostics or {
            "available": False, "backend_type": r.composed.sim, "unavailable_reason": "not reported"},
    }
    if learner.learner_diagnostics is not None:
        manifest["learner_diagnostics"] = learner.learner_diagnostics
    env_steps, fps = learner.env_steps, learner.final_fps
    if learner.rank is not None:
        manifest["data_parallel"] = data_parallel(learner)
        for report in learner.peer_reports or []:  # the aggregate: every collector's env steps
            if report is not None:
                env_steps += report["env_steps"]
                fps += report["final_env_steps_per_sec"]
    if learner.cuda_process_sharing is not None:
        manifest["cuda_process_sharing"] = learner.cuda_process_sharing
    elif s.cuda_process_sharing is not None:  # failed before the evidence was taken
        manifest["cuda_process_sharing"] = {"configured": s.cuda_process_sharing, "effective": None,
                                            "validated": False}
    exc = learner.shutdown.exception
    return {
        "schema_version": 1,
        "status": "completed" if completed else "failed",
        "failure_reason": None if completed else (
            f"{learner.shutdown.classification}: {exc['type']}: {exc['message']}" if exc
            else learner.shutdown.classification),
        "algo": r.composed.algo,
        "task": r.composed.task,
        "sim": r.composed.sim,
        # What the support matrix's `covers` markers are checked against (tests/conftest.py).
        "learner_device": r.devices.learner,
        "ranks": r.ranks.world_size,
        "config_hash": r.record()["config_hash"],
        "completed_iterations": learner.iteration,
        "total_env_steps": env_steps,
        "final_env_steps_per_sec": fps,
        "training_wall_time_sec": time.monotonic() - learner.start_time,
        "metric_schema_version": METRIC_SCHEMA_VERSION,
        "runtime_manifest": manifest,
    }


def validate_summary(summary: dict[str, Any]) -> None:
    validate_artifact("run_summary", summary)
