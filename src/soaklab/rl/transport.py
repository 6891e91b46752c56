"""Where the inference ring and ingress slots live: host shared memory or the GPU (docs/runtime.md).

The transport is derived from the carrier, never configured: a cpu carrier
gets the host ring (numpy views of named /dev/shm segments), a cuda carrier
the CUDA ring (CUDA tensors the learner allocates and shares with the
collector through CUDA IPC). Either way the host semaphores and counters of
`channels` carry the hand-offs; on the CUDA ring each hand-off also records an
interprocess CUDA event that the other side's stream waits on, so neither
process blocks its host thread on the GPU.

Both sides use the same object: the collector's methods are `put_obs`,
`take_actions` and `put_chunk`; the learner's `obs`, `answer`, `ingesting`, `chunk`,
`release_chunk` and `join`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from soaklab.contract.layout import Layout
from soaklab.rl.shm import SharedArrays


class HostRing:
    kind = "host_ring"

    def __init__(self, arrays: SharedArrays) -> None:
        self.arrays = arrays
        self.device = torch.device("cpu")

    # -- collector side ----------------------------------------------------------------------------
    def put_obs(self, g: int, obs: torch.Tensor, dones: torch.Tensor) -> None:
        n = obs.shape[0]
        self.arrays["ring_obs"][g, :n] = obs.cpu().numpy()
        self.arrays["ring_dones"][g, :n] = dones.cpu().numpy()

    def take_actions(self, g: int, n: int) -> torch.Tensor:
        return torch.from_numpy(self.arrays["ring_actions"][g, :n].copy())

    def put_chunk(self, slot: int, chunk: torch.Tensor) -> None:
        self.arrays["ingress"][slot, : chunk.shape[0]] = chunk.numpy()

    # -- learner side ------------------------------------------------------------------------------
    def obs(self, g: int, n: int, device: torch.device) -> torch.Tensor:
        return torch.from_numpy(self.arrays["ring_obs"][g, :n]).to(device)

    def answer(self, g: int, actions: torch.Tensor) -> None:
        self.arrays["ring_actions"][g, : actions.shape[0]] = actions.cpu().numpy()

    @contextmanager
    def ingesting(self) -> Iterator[None]:
        yield

    def join(self) -> None:
        pass

    def chunk(self, slot: int, n: int, device: torch.device) -> torch.Tensor:
        # A copy: the slot is released (and may be rewritten) right after the learner is done with it.
        return torch.from_numpy(self.arrays["ingress"][slot, :n].copy()).to(device)

    def release_chunk(self, slot: int) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class CudaRingHandles:
    """Picklable under spawn: CUDA tensors and interprocess events travel as CUDA IPC handles."""

    ring_obs: torch.Tensor
    ring_dones: torch.Tensor
    ring_actions: torch.Tensor
    ingress: torch.Tensor
    obs_ready: list[Any]  # torch.cuda.Event per inference slot: observations written
    act_ready: list[Any]  # per inference slot: actions written
    chunk_filled: list[Any]  # per ingress slot: chunk written
    chunk_free: list[Any]  # per ingress slot: the learner's copy out of it is done


def make_cuda_ring(layout: Layout, device: str) -> CudaRingHandles:
    shapes = layout.shapes()

    def tensor(key: str) -> torch.Tensor:
        shape, dtype = shapes[key]
        return torch.zeros(shape, dtype=getattr(torch, dtype), device=device)

    def events(count: int) -> list[Any]:
        return [torch.cuda.Event(interprocess=True) for _ in range(count)]

    with torch.cuda.device(torch.device(device)):
        return CudaRingHandles(
            ring_obs=tensor("ring_obs"), ring_dones=tensor("ring_dones"), ring_actions=tensor("ring_actions"),
            ingress=tensor("ingress"), obs_ready=events(layout.capacity), act_ready=events(layout.capacity),
            chunk_filled=events(layout.depth), chunk_free=events(layout.depth),
        )


class CudaRing:
    kind = "cuda_ring"

    def __init__(self, handles: CudaRingHandles) -> None:
        self.h = handles
        self.device = handles.ring_obs.device
        self._side: torch.cuda.Stream | None = None
        self._side_pending = False  # the side stream has work the main stream has not waited for

    # -- collector side (its current stream) -------------------------------------------------------
    def put_obs(self, g: int, obs: torch.Tensor, dones: torch.Tensor) -> None:
        n = obs.shape[0]
        self.h.ring_obs[g, :n].copy_(obs)
        self.h.ring_dones[g, :n].copy_(dones)
        self.h.obs_ready[g].record()

    def take_actions(self, g: int, n: int) -> torch.Tensor:
        torch.cuda.current_stream(self.device).wait_event(self.h.act_ready[g])
        # A copy: the learner rewrites the slot after the next observations, while the env may keep
        # the previous action as part of its observation.
        return self.h.ring_actions[g, :n].clone()

    def put_chunk(self, slot: int, chunk: torch.Tensor) -> None:
        torch.cuda.current_stream(self.device).wait_event(self.h.chunk_free[slot])
        self.h.ingress[slot, : chunk.shape[0]].copy_(chunk)
        self.h.chunk_filled[slot].record()

    # -- learner side ------------------------------------------------------------------------------
    def obs(self, g: int, n: int, device: torch.device) -> torch.Tensor:
        torch.cuda.current_stream(self.device).wait_event(self.h.obs_ready[g])
        return self.h.ring_obs[g, :n]  # read in stream order, before the answer is published

    def answer(self, g: int, actions: torch.Tensor) -> None:
        self.h.ring_actions[g, : actions.shape[0]].copy_(actions)
        self.h.act_ready[g].record()

    @property
    def side(self) -> torch.cuda.Stream:
        if self._side is None:
            self._side = torch.cuda.Stream(self.device)
        return self._side

    @contextmanager
    def ingesting(self) -> Iterator[None]:
        """Ingress copies (and what reads the vector they fill) run on a side stream. It first waits for
        the main stream (the last update may still gather from replay rows about to be overwritten).
        The main stream does not wait for it here but at `join`, where it next needs what the side
        wrote: the next inference needs none of it, so it starts as soon as the observations land."""
        main = torch.cuda.current_stream(self.device)
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            yield
        self._side_pending = True

    def join(self) -> None:
        """Order the main stream after the ingress so far: before an update samples the replay, and
        before the host reads what the side stream wrote (a log flush, a checkpoint)."""
        if self._side_pending:
            torch.cuda.current_stream(self.device).wait_stream(self.side)
            self._side_pending = False

    def chunk(self, slot: int, n: int, device: torch.device) -> torch.Tensor:
        self.side.wait_event(self.h.chunk_filled[slot])
        return self.h.ingress[slot, :n]

    def release_chunk(self, slot: int) -> None:
        self.h.chunk_free[slot].record(self.side)

    def close(self) -> None:
        # The collector has exited (or been killed): nothing reads these any more.
        torch.cuda.synchronize(self.device)


def make_transport(handle: SharedArrays | CudaRingHandles) -> HostRing | CudaRing:
    return CudaRing(handle) if isinstance(handle, CudaRingHandles) else HostRing(handle)
