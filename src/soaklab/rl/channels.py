"""The inference ring and replay ingress between learner and collector (docs/runtime.md).

Inference ring: `c` slots of observations/dones/actions. Tick t uses slot t % c;
the envs are split into c contiguous groups stepped in turn, so one group's
physics overlaps the learner's answer for another (up to c ticks in flight).

Replay ingress: `depth` packed slots of `slot_rows` rows. A vector of N rows is
published as ceil(N / slot_rows) chunks; the collector waits when every slot is
full (backpressure, counted); the learner copies a chunk into the replay ring,
then releases the slot.

Every counter has one writer (a plain int64 store in shared memory); the
semaphores carry the hand-offs, so neither side spins.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from soaklab.contract.layout import CONTROL_WORDS, Layout
from soaklab.rl.shm import ArraySpec, SharedArrays

POLL_S = 0.05  # wake-up interval of blocking waits, to notice stop requests and dead peers


class C(enum.IntEnum):
    """Indices of the int64 control array. Comment: which side writes it."""

    STOP = 0  # learner
    TICKS_PUBLISHED = 1  # collector: observation publications
    TICKS_ANSWERED = 2  # learner: action publications
    TICKS_CONSUMED = 3  # collector: answers it has stepped
    MAX_IN_FLIGHT = 4  # collector
    MAX_PUBLICATION_LAG = 5  # collector
    INGRESS_PUBLISHED = 6  # collector
    INGRESS_RELEASED = 7  # learner
    HIGH_WATER = 8  # collector
    BACKPRESSURE_WAITS = 9  # collector
    BACKPRESSURE_WAIT_NS = 10  # collector
    EARLY_RETURNS = 11  # collector
    DROPPED_BATCHES = 12  # collector
    CLOSED_RETURNS = 13  # collector
    STOP_RETURNS = 14  # collector
    VECTOR_STEPS = 15  # collector
    ENV_STEP_NS = 16  # collector: time in env.step
    ACTION_WAIT_NS = 17  # collector: time waiting for answers
    INGRESS_WRITE_NS = 18  # collector: time writing ingress chunks
    METRICS_SEQ = 19  # collector: metric publications
    READY = 20  # collector: env built, first observations published
    COLLECTOR_CUDA_PEAK = 21  # collector: torch's peak CUDA allocation in the collector, bytes
    SAVE_AT = 22  # learner: the vector step count after which the collector also saves its half of a
                  # resumable checkpoint (a signal's: soaklab.rl.cancel); 0 = none
    PHYSICS_UNSTABLE = 23  # collector: envs the simulator reset as unstable (soaklab.rl.diverged)
    COUNT = 24


# The layout reserves the control array's words without importing this protocol.
assert C.COUNT <= CONTROL_WORDS, "soaklab.contract.layout.CONTROL_WORDS is too small for the channel counters"


class Stopped(Exception):
    """A wait ended because the run is stopping."""


class PeerDied(Exception):
    """A wait ended because the other process is gone."""


@dataclass(frozen=True)
class ChannelHandles:
    """What the spawned collector needs to attach: picklable under the spawn start method."""

    layout: Layout
    specs: dict[str, ArraySpec]
    obs_ready: list[Any]  # one semaphore per inference slot
    act_ready: list[Any]
    ingress_free: Any
    ingress_filled: Any
    # The CUDA ring (soaklab.rl.transport.CudaRingHandles) when the carrier is a GPU; then only the
    # counters, row counts and metrics live in shared memory.
    cuda_ring: Any = None


def make_channels(ctx: Any, layout: Layout, cuda_ring: Any = None) -> tuple[SharedArrays, ChannelHandles]:
    shapes = layout.shapes()
    arrays = SharedArrays.create({k: shapes[k] for k in layout.shared_memory_arrays(cuda_ring is not None)})
    handles = ChannelHandles(
        layout=layout,
        specs=arrays.specs,
        obs_ready=[ctx.Semaphore(0) for _ in range(layout.capacity)],
        act_ready=[ctx.Semaphore(0) for _ in range(layout.capacity)],
        ingress_free=ctx.Semaphore(layout.depth),
        ingress_filled=ctx.Semaphore(0),
        cuda_ring=cuda_ring,
    )
    return arrays, handles


def wait(sem: Any, control: np.ndarray, alive: Callable[[], bool] | None = None, stop_aware: bool = True) -> None:
    """Acquire `sem`, waking every POLL_S to notice a stop request or a dead peer.

    A stop request wins over a successful acquire: the learner releases every semaphore
    once to wake the collector, and that release must not be taken for an answer."""
    while not sem.acquire(timeout=POLL_S):
        if stop_aware and control[C.STOP]:
            raise Stopped()
        if alive is not None and not alive():
            raise PeerDied()
    if stop_aware and control[C.STOP]:
        raise Stopped()


def bump_max(control: np.ndarray, index: C, value: int) -> None:
    if value > control[index]:
        control[index] = value
