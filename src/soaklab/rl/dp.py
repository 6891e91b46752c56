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
import time
from collections.abc import Callable
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
JOINED_KEY = "soaklab/joined"
RENDEZVOUS_POLL_S = 0.1
TIMEOUT = timedelta(minutes=10)


def nccl_environment() -> dict[str, str]:
    """Set the NCCL defaults where the environment has none; return the values in effect."""
    for key, value in NCCL_DEFAULTS.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in NCCL_DEFAULTS}


class RendezvousAborted(Exception):  # noqa: N818 - a condition, named for what happened
    """Another rank ended before every rank had joined."""


@dataclass
class DataParallel:
    """This process's place in the group and the collectives the learner and agents call."""

    rank: int
    world_size: int
    backend: str
    warmed_up: bool = False  # an eager collective ran before any capture (collective_warmup)
    # One static flat buffer per (kind, module): gradients, or floating buffers.
    _flat: dict[tuple[str, int], torch.Tensor] = field(default_factory=dict)

    @classmethod
    def join(cls, run_dir: Path, rank: int, world_size: int, backend: str,
             gone: Callable[[], str | None] = lambda: None) -> DataParallel:
        """Rendezvous through a FileStore in the run dir (single node: no address, no port).

        Every rank first counts itself in and polls the count, asking `gone` between polls: a rank
        that died while starting ends the others' wait at once instead of at the group's timeout."""
        if backend == "nccl":
            nccl_environment()
        store = dist.FileStore(str(run_dir / RENDEZVOUS_FILE), world_size)
        store.add(JOINED_KEY, 1)
        deadline = time.monotonic() + TIMEOUT.total_seconds()
        while store.add(JOINED_KEY, 0) < world_size:
            reason = gone()
            if reason is not None:
                raise RendezvousAborted(reason)
            if time.monotonic() > deadline:
                raise RendezvousAborted(f"not every rank joined within {TIMEOUT}")
            time.sleep(RENDEZVOUS_POLL_S)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=TIMEOUT)
        return cls(rank, world_size, backend)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def close(self) -> None:
        """Leave the group; the captured graphs holding its collectives must be released first."""
        self._flat.clear()
        if dist.is_initialized():
            dist.destroy_process_group()

    def abort(self) -> None:
        """Fail every pending and future collective of this rank at once (a peer is gone: NCCL would
        otherwise wait out its timeout). Called from the rank watch thread."""
        if dist.is_initialized():
            from torch.distributed.distributed_c10d import _abort_process_group

            _abort_process_group()

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
        self._average(("grad", id(module)), [p.grad for p in module.parameters() if p.grad is not None])

    @torch.no_grad()
    def average_buffers(self, module: nn.Module) -> None:
        """Floating buffers (BatchNorm running statistics) averaged over the ranks, in one all-reduce."""
        self._average(("buffer", id(module)), [b for b in module.buffers() if b.is_floating_point()])

    def _average(self, key: tuple[str, int], tensors: list[torch.Tensor]) -> None:
        if not tensors:
            return
        size = sum(t.numel() for t in tensors)
        flat = self._flat.get(key)
        if flat is None or flat.numel() != size:
            flat = self._flat[key] = torch.zeros(size, dtype=tensors[0].dtype, device=tensors[0].device)
        views = list(flat.split([t.numel() for t in tensors]))
        targets = [t.reshape(-1) for t in tensors]
        torch._foreach_copy_(views, targets)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat.div_(self.world_size)
        torch._foreach_copy_(targets, views)

    def collective_warmup(self, device: torch.device) -> None:
        """One eager all-reduce, then a device sync: NCCL initialises its communicator lazily, on the
        first collective, and that may not happen while a CUDA graph is being captured."""
        probe = torch.ones(1, device=device)
        dist.all_reduce(probe)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.warmed_up = True

    @torch.no_grad()
    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """In-place sum over the ranks (batch moments of the observation normalisers)."""
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    # -- scalars for the logs and the summary ----------------------------------------------------------
    def reduce_rows(self, rows: list[dict[str, float | None]], keys: list[str], summed: frozenset[str],
                    device: torch.device) -> list[dict[str, float | None]]:
        """Logged iterations combined over the ranks in one all-reduce: per key, the sum (counts,
        throughputs) or the mean over the ranks that have a value; None where none has."""
        data = torch.tensor([[row.get(k) or 0.0 for k in keys] for row in rows], dtype=torch.float64, device=device)
        present = torch.tensor([[0.0 if row.get(k) is None else 1.0 for k in keys] for row in rows],
                               dtype=torch.float64, device=device)
        both = torch.stack([data, present])
        dist.all_reduce(both)
        total, count = both[0].tolist(), both[1].tolist()
        out = []
        for r in range(len(rows)):
            out.append({k: None if count[r][i] == 0 else (total[r][i] if k in summed else total[r][i] / count[r][i])
                        for i, k in enumerate(keys)})
        return out

    def gather_records(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """Each rank's record (device, GPU UUID, collector), in rank order, on every rank."""
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, record)
        return out
