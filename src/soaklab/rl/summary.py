"""run_summary.json with the runtime manifest v1 (docs/runtime.md), checked against its schema."""

from __future__ import annotations

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
        "config_hash": r.record()["config_hash"],
        "completed_iterations": learner.iteration,
        "total_env_steps": learner.env_steps,
        "final_env_steps_per_sec": learner.final_fps,
        "training_wall_time_sec": time.monotonic() - learner.start_time,
        "metric_schema_version": METRIC_SCHEMA_VERSION,
        "runtime_manifest": manifest,
    }


def validate_summary(summary: dict[str, Any]) -> None:
    validate_artifact("run_summary", summary)
