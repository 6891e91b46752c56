"""Data parallelism over torch.distributed: one rank per GPU (docs/runtime.md, "Data parallelism").

Each rank owns its collector, envs, replay ring and learner; nothing but gradients and statistics
crosses between them. Rank 0 broadcasts every parameter and buffer once at the start; before every
optimizer step each rank all-reduces one flat gradient buffer of the module it steps (SUM, then
divided by the world size), so parameters and optimizer states stay identical without exchanging
replay. Statistics the forward pass reads (observation normalisers, BatchNorm running stats) are
merged over the ranks too, so every rank holds the same model and any rank's checkpoint is the run's.

NCCL on GPUs, gloo on CPUs (the CPU tests run the same code path with two CPU ranks).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

# Single-node defaults (TCP over loopback, no peer-to-peer or shared-memory transport), as the
# runtime's multi-GPU contract fixes them; a value already in the environment wins. The manifest
# records what was in effect.
NCCL_DEFAULTS = {"NCCL_SOCKET_IFNAME": "lo", "NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
RENDEZVOUS_FILE = ".dp-rendezvous"
TIMEOUT = timedelta(minutes=10)


def nccl_environment() -> dict[str, str]:
    """Set the NCCL defaults where the environment has none; return the values in effect."""
    for key, value in NCCL_DEFAULTS.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in NCCL_DEFAULTS}


@dataclass
class DataParallel:
    """This process's place in the group and the collectives the learner and agents call."""

    rank: int
    world_size: int
    backend: str
    _flat: dict[int, torch.Tensor] = field(default_factory=dict)  # one gradient buffer per module

    @classmethod
    def join(cls, run_dir: Path, rank: int, world_size: int, backend: str) -> DataParallel:
        """Rendezvous through a FileStore in the run dir (single node: no address, no port)."""
        if backend == "nccl":
            nccl_environment()
        store = dist.FileStore(str(run_dir / RENDEZVOUS_FILE), world_size)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=TIMEOUT)
        return cls(rank, world_size, backend)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    # -- the model -----------------------------------------------------------------------------------
    @torch.no_grad()
    def broadcast(self, modules: list[nn.Module]) -> None:
        """Rank 0's parameters and buffers everywhere (actor, critics, targets, temperature, norms)."""
        for module in modules:
            for tensor in [*module.parameters(), *module.buffers()]:
                dist.broadcast(tensor.data, src=0)

    @torch.no_grad()
    def average_grads(self, module: nn.Module) -> None:
        """One all-reduce of the module's gradients through a static flat buffer (a CUDA graph may
        capture it: the buffer's address never changes)."""
        params = [p for p in module.parameters() if p.grad is not None]
        if not params:
            return
        flat = self._flat.get(id(module))
        size = sum(p.numel() for p in params)
        if flat is None or flat.numel() != size:
            flat = self._flat[id(module)] = torch.zeros(size, dtype=params[0].grad.dtype, device=params[0].device)
        views = list(flat.split([p.numel() for p in params]))
        grads = [p.grad.reshape(-1) for p in params]
        torch._foreach_copy_(views, grads)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat.div_(self.world_size)
        torch._foreach_copy_(grads, views)

    @torch.no_grad()
    def average_buffers(self, module: nn.Module) -> None:
        """Floating buffers (BatchNorm running statistics) averaged over the ranks."""
        for buffer in module.buffers():
            if buffer.is_floating_point():
                dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
                buffer.div_(self.world_size)

    @torch.no_grad()
    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """In-place sum over the ranks (batch moments of the observation normalisers)."""
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    # -- scalars for the logs and the summary ----------------------------------------------------------
    def reduce_scalars(self, values: dict[str, float | None], summed: frozenset[str], device: torch.device
                       ) -> dict[str, float | None]:
        """Cross-rank scalars: counts and throughputs summed, everything else averaged; a value some
        rank has not produced yet (None) stays None."""
        keys = sorted(values)
        present = torch.tensor([0.0 if values[k] is None else 1.0 for k in keys], dtype=torch.float64, device=device)
        data = torch.tensor([values[k] or 0.0 for k in keys], dtype=torch.float64, device=device)
        dist.all_reduce(present)
        dist.all_reduce(data)
        out: dict[str, float | None] = {}
        for i, key in enumerate(keys):
            if present[i] < self.world_size:
                out[key] = None
            else:
                out[key] = float(data[i]) if key in summed else float(data[i]) / self.world_size
        return out

    def gather_records(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """Each rank's record (device, GPU UUID, collector), in rank order, on every rank."""
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, record)
        return out
