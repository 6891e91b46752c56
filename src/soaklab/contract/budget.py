"""The tensor memory budget, computed at resolution and checked again on the host that runs it
(docs/settings-contract.md, "Memory budget").

Each part is placed where the runtime will allocate it: replay storage, the
learner batch and workspace slack on the learner device; the inference ring and
replay ingress on the carrier (shared memory for a cpu carrier, the GPU for a
cuda one). Each pool must fit its host limit, or resolution fails closed
naming the knobs that shrink the largest part.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from soaklab.contract.contract import RuntimeSettings
from soaklab.contract.devices import HostCapabilities, ResolvedDevices
from soaklab.contract.layout import Layout
from soaklab.errors import InvalidInput

FLOAT32 = 4
WORKSPACE_SLACK_FRACTION = 0.10
WORKSPACE_SLACK_MIN_BYTES = 32 << 20
# Headroom kept free on CUDA devices and /dev/shm for allocator fragmentation and other users.
DEVICE_FILL_LIMIT = 0.8

# Knobs that shrink each part, named in a refusal (largest part first).
PART_KNOBS: dict[str, tuple[str, ...]] = {
    "replay_storage": ("algo.replay_buffer_size",),
    "replay_ingress": ("training.replay_ingress_depth", "training.replay_ingress_slot_rows"),
    "learner_batch": ("algo.batch_size", "algo.updates_per_step"),
    "inference_ring": ("training.inference_slot_capacity", "algo.num_envs"),
    "workspace_slack": ("algo.replay_buffer_size",),
}


@dataclass(frozen=True)
class MemoryPool:
    """One place memory is taken from, with what it needs and what it may use."""

    name: str
    device: str
    parts: tuple[str, ...]
    required_bytes: int
    limit_bytes: int
    limit_rule: str

    @property
    def fits(self) -> bool:
        return self.required_bytes <= self.limit_bytes


@dataclass(frozen=True)
class MemoryBudget:
    replay_row_width: int
    parts: dict[str, int]
    pools: tuple[MemoryPool, ...]

    @property
    def total_bytes(self) -> int:
        return sum(self.parts.values())

    def as_record(self) -> dict[str, Any]:
        return {
            "replay_row_width": self.replay_row_width,
            "parts_bytes": dict(self.parts),
            "tensor_memory_budget_bytes": self.total_bytes,
            "pools": [
                {
                    "name": p.name,
                    "device": p.device,
                    "parts": list(p.parts),
                    "required_bytes": p.required_bytes,
                    "limit_bytes": p.limit_bytes,
                    "limit_rule": p.limit_rule,
                    "fits": p.fits,
                }
                for p in self.pools
            ],
        }


def human_bytes(n: int) -> str:
    """Bytes in the largest binary unit that keeps the number at least 1 (never "0.00 GiB")."""
    value, unit = float(n), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    return f"{n} B" if unit == "B" else f"{value:.2f} {unit}"


# /dev/shm is a tmpfs: every segment takes whole pages, and every named semaphore is a file of one
# page. The host-ring carrier makes one segment per array of the layout.
SHM_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _pages(n: int) -> int:
    return -(-max(n, 1) // SHM_PAGE_BYTES) * SHM_PAGE_BYTES


def shm_required_bytes(layout: Layout) -> int:
    """What the host ring's segments and semaphores take from /dev/shm, page rounding included."""
    segments = sum(_pages(layout.nbytes(a)) for a in layout.shared_memory_arrays(carrier_is_cuda=False))
    return segments + layout.semaphores * SHM_PAGE_BYTES


def compute_memory_budget(
    settings: RuntimeSettings,
    replay_buffer_size: int,
    layout: Layout,
    devices: ResolvedDevices,
    host: HostCapabilities,
) -> MemoryBudget:
    width = layout.row_width
    parts = {
        "replay_storage": replay_buffer_size * width * FLOAT32,
        "replay_ingress": layout.ingress_bytes,
        "learner_batch": 2 * settings.learner_rows_per_sync * width * FLOAT32,
        "inference_ring": layout.inference_ring_bytes,
    }
    parts["workspace_slack"] = max(int(WORKSPACE_SLACK_FRACTION * sum(parts.values())), WORKSPACE_SLACK_MIN_BYTES)

    learner_parts = ("replay_storage", "learner_batch", "workspace_slack")
    carrier_parts = ("replay_ingress", "inference_ring")
    pools: list[MemoryPool] = []
    if devices.learner.startswith("cuda"):
        cuda_parts = learner_parts + (carrier_parts if devices.carrier.startswith("cuda") else ())
        index = int(devices.learner.split(":")[1])
        free = host.cuda_free_bytes[index] if index < len(host.cuda_free_bytes) else 0
        pools.append(MemoryPool("cuda", devices.learner, cuda_parts, sum(parts[p] for p in cuda_parts),
                                int(DEVICE_FILL_LIMIT * free), f"{DEVICE_FILL_LIMIT} x free device memory"))
        host_parts: tuple[str, ...] = ()
    else:
        host_parts = learner_parts
    if devices.carrier == "cpu":
        pools.append(MemoryPool("shared_memory", "/dev/shm", carrier_parts,
                                shm_required_bytes(layout),
                                int(DEVICE_FILL_LIMIT * host.shm_free_bytes), f"{DEVICE_FILL_LIMIT} x free /dev/shm"))
    if host_parts:
        pools.append(MemoryPool("host", "cpu" if devices.learner == "cpu" else devices.learner, host_parts,
                                sum(parts[p] for p in host_parts), host.mem_available_bytes, "MemAvailable"))
    return MemoryBudget(replay_row_width=width, parts=parts, pools=tuple(pools))


class BudgetError(InvalidInput):
    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(message)


def check_memory_budget(budget: MemoryBudget) -> None:
    """Refuse a budget any pool of which does not fit, naming the knobs to change."""
    for pool in budget.pools:
        if pool.fits:
            continue
        largest = max(pool.parts, key=lambda p: budget.parts[p])
        knobs = PART_KNOBS[largest]
        breakdown = ", ".join(f"{p} {human_bytes(budget.parts[p])}" for p in pool.parts)
        raise BudgetError(
            knobs[0],
            f"{knobs[0]}: memory budget refused: {pool.name} ({pool.device}) needs {human_bytes(pool.required_bytes)} "
            f"({breakdown}) but {pool.limit_rule} is {human_bytes(pool.limit_bytes)}; lower {' or '.join(knobs)}",
        )
