"""The pass table of a soak (docs/soak.md, "The pass table"), as checks with expected and actual values.

The monitor applies the run-summary checks to decide shutdown_contract_violation;
`soaklab validate` applies all of them again from the artifacts on disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from soaklab.config.run_config import recorded_run
from soaklab.contract.layout import chunks_per_vector


@dataclass(frozen=True)
class Check:
    name: str
    expected: Any
    actual: Any

    @property
    def passed(self) -> bool:
        return self.actual == self.expected and type(self.actual) is type(self.expected)

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "expected": self.expected, "actual": self.actual, "passed": self.passed}


def row_passed(row: dict[str, Any]) -> bool:
    """A check row of validation.json judged again from its own expected and actual values: its
    `passed` field is not read (a file is anyone's to edit)."""
    return isinstance(row, dict) and "expected" in row and "actual" in row and \
        Check(str(row.get("name")), row["expected"], row["actual"]).passed


def run_summary_checks(summary: dict[str, Any], num_envs: int) -> list[Check]:
    """What the trainer's own run_summary.json must show for a passing soak."""
    manifest = summary["runtime_manifest"]
    flight, ingress, shutdown = manifest["inference_flight"], manifest["replay_ingress"], manifest["shutdown"]
    chunks = chunks_per_vector(num_envs, ingress["ingress_slot_rows"])
    return [
        Check("run status", "completed", summary["status"]),
        Check("run failure_reason", None, summary["failure_reason"]),
        Check("final inference queue depth", 0, flight["queue_depth"]),
        Check("final inference publication lag", 0, flight["publication_lag"]),
        Check("final replay occupancy", 0, ingress["occupancy"]),
        Check("replay dropped batches", 0, ingress["dropped_batches"]),
        Check("replay early returns", 0, ingress["early_returns"]),
        Check("replay release sequence = published sequence", ingress["published_sequence"],
              ingress["release_sequence"]),
        Check(f"published sequence = vector_steps x ceil({num_envs} / {ingress['ingress_slot_rows']})",
              ingress["vector_steps"] * chunks, ingress["published_sequence"]),
        Check("shutdown classification", "normal_completion", shutdown["classification"]),
        Check("shutdown cleanup errors", [], shutdown["cleanup"]["errors"]),
    ]


def recomputed_leak(soak: dict[str, Any]) -> bool | str:
    """The leak verdict drawn again from the soak JSON's own samples (from the first iteration of the
    run's last segment, as the monitor drew it); where the recorded verdict says otherwise, a line
    saying so, which no check expects."""
    from soaklab.soak.leak import leak_verdict

    segments = (soak.get("run_summary") or {}).get("segments") or [{}]
    verdict = leak_verdict(soak.get("samples") or [], after_iteration=int(segments[-1].get("start_iteration") or 0))
    recorded = ((soak.get("resource_summary") or {}).get("leak_verdict") or {}).get("leak")
    if recorded != verdict["leak"]:
        return f"recorded {recorded}, but the samples give {verdict['leak']}"
    return verdict["leak"]


def monitor_checks(soak: dict[str, Any]) -> list[Check]:
    """What the monitor itself must have seen. The leak verdict is recomputed from the samples."""
    return [
        Check("monitor status", "passed", soak["status"]),
        Check("trainer return code", 0, soak["shutdown"]["trainer_returncode"]),
        Check("soak failure_reason", None, soak["failure_reason"]),
        Check("soak failure_classification", None, soak["failure_classification"]),
        Check("post-shutdown residual processes", [],
              [p["pid"] for p in soak["post_shutdown"]["residual_processes"]]),
        Check("leak verdict", False, recomputed_leak(soak)),
    ]


def rank_checks(summary: dict[str, Any], run_config: dict[str, Any]) -> list[Check]:
    """A data-parallel run's rank evidence (docs/runtime.md, "Data parallelism"); none for one rank."""
    plan = run_config["run"].get("data_parallel") or {}
    world = (plan.get("ranks") or {}).get("resolved", 1)
    if world < 2:
        return []
    dp = summary["runtime_manifest"].get("data_parallel") or {"ranks": [], "dp_sync": {}}
    ranks = dp["ranks"]
    algo = recorded_run("run_config.json", run_config).algo
    checks = [
        Check("data parallel: ranks in the manifest", list(range(world)), [r["rank"] for r in ranks]),
        Check("data parallel: every rank reported its end", [True] * world, [r["reported"] for r in ranks]),
        Check("data parallel: every rank ended normally", ["normal_completion"] * world,
              [r["classification"] for r in ranks]),
        Check("data parallel: every rank ran every iteration", [algo.max_iterations] * world,
              [r["iteration"] for r in ranks]),
        Check("data parallel: total env steps = ranks x iterations x num_envs",
              world * algo.max_iterations * algo.num_envs, summary["total_env_steps"]),
    ]
    if plan.get("backend") == "nccl":
        uuids = [r["gpu_uuid"] for r in ranks]
        checks.append(Check("data parallel: one GPU per rank (distinct GPU UUIDs)", world,
                            len({u for u in uuids if u})))
        if dp["dp_sync"].get("cuda_graph_optimizer_capture") != "eager":
            checks.append(Check("data parallel: captured all-reduce after an eager collective warm-up", True,
                                dp["dp_sync"].get("cuda_graph_collective_warmup")))
    return checks


def failed(checks: list[Check]) -> list[Check]:
    return [c for c in checks if not c.passed]
