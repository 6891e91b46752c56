"""How many data-parallel ranks a run has and where their collectors run (docs/runtime.md,
"Data parallelism").

A CUDA learner asked for as plain `cuda` gets one rank per visible GPU: CUDA_VISIBLE_DEVICES is
the topology, and each rank later sees its own entry as `cuda:0`. `training.dp_ranks` may ask for
fewer (never more than are visible); a CPU learner gets `training.dp_ranks` ranks over gloo (the
CPU tests run the multi-rank path that way). Resolved once, recorded in run_config.json under
`run.data_parallel`, and re-checked when a record is loaded on another host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from soaklab.errors import SettingError

RANKS_KEY = "training.dp_ranks"
CPU_IDS_KEY = "training.dp_collector_cpu_ids"


@dataclass(frozen=True)
class RankPlan:
    world_size: int = 1
    backend: str | None = None  # nccl (CUDA learner) or gloo (CPU learner); None for one rank
    configured: int | None = None  # training.dp_ranks as written
    # Each rank's CPU ids (its process, its collector, the collector's MuJoCo threads); None: unpinned.
    collector_cpu_ids: tuple[tuple[int, ...], ...] | None = None

    @property
    def parallel(self) -> bool:
        return self.world_size > 1

    def run_dir_suffix(self) -> str:
        """An auto-named multi-GPU run dir ends _gpuxN (CPU ranks: _cpuxN); one rank adds nothing."""
        if not self.parallel:
            return ""
        return f"_{'gpu' if self.backend == 'nccl' else 'cpu'}x{self.world_size}"

    def as_record(self) -> dict[str, Any]:
        ids = None if self.collector_cpu_ids is None else [list(c) for c in self.collector_cpu_ids]
        return {"ranks": {"configured": self.configured, "resolved": self.world_size}, "backend": self.backend,
                "collector_cpu_ids": ids}


def resolve_ranks(configured: Any, cpu_ids: Any, learner_request: Any, learner: str, cuda_device_count: int,
                  cuda_process_sharing: str | None, usable_cpus: tuple[int, ...]) -> RankPlan:
    """The rank plan for a resolved learner device; every refusal names its setting."""
    if configured is not None and (isinstance(configured, bool) or not isinstance(configured, int) or configured < 1):
        raise SettingError(RANKS_KEY, configured, "must be null (one rank per visible GPU) or an integer >= 1")
    if learner.startswith("cuda"):
        # An explicit ordinal (cuda:N) pins the run to that one GPU.
        available = cuda_device_count if learner_request == "cuda" else 1
        world = available if configured is None else configured
        if world > available:
            where = (f"{cuda_device_count} GPU(s) are visible" if learner_request == "cuda"
                     else f"training.device={learner_request} names one GPU")
            raise SettingError(RANKS_KEY, configured,
                               f"asks for more ranks than GPUs: {where}; list the GPUs in CUDA_VISIBLE_DEVICES "
                               "and set training.device=cuda")
        backend = "nccl"
    elif learner == "cpu":
        world, backend = configured or 1, "gloo"
    else:
        if configured not in (None, 1):
            raise SettingError(RANKS_KEY, configured, f"data parallelism needs a cuda or cpu learner (here {learner})")
        world, backend = 1, None
    if world > 1 and cuda_process_sharing == "mps":
        raise SettingError("training.cuda_process_sharing", cuda_process_sharing,
                           f"mps is single-GPU and this run has {world} data-parallel ranks; set "
                           f"{RANKS_KEY}=1 (or one GPU in CUDA_VISIBLE_DEVICES), or cuda_process_sharing=null")
    plan_ids = _cpu_ids(cpu_ids, world, usable_cpus)
    return RankPlan(world, backend if world > 1 else None, configured, plan_ids)


def _cpu_ids(value: Any, world: int, usable: tuple[int, ...]) -> tuple[tuple[int, ...], ...] | None:
    if value is None:
        if world == 1:
            return None
        share = len(usable) // world
        if share < 1:
            raise SettingError(RANKS_KEY, world, f"each rank's collector needs a core and {len(usable)} are usable")
        return tuple(tuple(usable[r * share:(r + 1) * share]) for r in range(world))
    if not isinstance(value, (list, tuple)) or len(value) != world:
        raise SettingError(CPU_IDS_KEY, value, f"must be null or a list of {world} CPU id lists, one per rank")
    out = []
    for ids in value:
        if (not isinstance(ids, (list, tuple)) or not ids
                or any(isinstance(i, bool) or not isinstance(i, int) for i in ids)):
            raise SettingError(CPU_IDS_KEY, value, "each rank's entry must be a non-empty list of CPU ids")
        unusable = sorted(set(ids) - set(usable))
        if unusable:
            raise SettingError(CPU_IDS_KEY, value, f"CPU {unusable[0]} is not usable here (usable: {list(usable)})")
        out.append(tuple(ids))
    return tuple(out)
