"""The inference ring and replay ingress between learner and collector (DESIGN §8).

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
    COUNT = 22


class Stopped(Exception):
    """A wait ended because the run is stopping."""


class PeerDied(Exception):
    """A wait ended because the other process is gone."""


@dataclass(frozen=True)
class Layout:
    num_envs: int
    capacity: int  # inference slots c
    obs_dim: int
    critic_dim: int
    action_dim: int
    depth: int  # ingress slots
    slot_rows: int
    num_metrics: int

    @property
    def group_bounds(self) -> list[tuple[int, int]]:
        """Contiguous env ranges [start, stop) of the c groups."""
        edges = np.linspace(0, self.num_envs, self.capacity + 1).round().astype(int)
        return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]

    @property
    def group_size(self) -> int:
        return max(b - a for a, b in self.group_bounds)

    @property
    def row_width(self) -> int:
        return 2 * self.obs_dim + 2 * self.critic_dim + self.action_dim + 3

    @property
    def chunks_per_vector(self) -> int:
        return -(-self.num_envs // self.slot_rows)

    def row_slices(self) -> dict[str, slice]:
        widths = {"obs": self.obs_dim, "next_obs": self.obs_dim, "critic": self.critic_dim,
                  "next_critic": self.critic_dim, "action": self.action_dim, "reward": 1, "terminated": 1,
                  "truncated": 1}
        out, start = {}, 0
        for name, width in widths.items():
            out[name] = slice(start, start + width)
            start += width
        return out

    def shapes(self) -> dict[str, tuple[tuple[int, ...], str]]:
        g = self.group_size
        return {
            "ring_obs": ((self.capacity, g, self.obs_dim), "float32"),
            "ring_dones": ((self.capacity, g), "float32"),
            "ring_actions": ((self.capacity, g, self.action_dim), "float32"),
            "ingress": ((self.depth, self.slot_rows, self.row_width), "float32"),
            "ingress_rows": ((self.depth,), "int64"),
            "control": ((int(C.COUNT),), "int64"),
            "metrics": ((max(self.num_metrics, 1),), "float64"),
        }


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


# Arrays that carry observations, actions and transitions; the rest are host-side bookkeeping.
DATA_ARRAYS = ("ring_obs", "ring_dones", "ring_actions", "ingress")


def make_channels(ctx: Any, layout: Layout, cuda_ring: Any = None) -> tuple[SharedArrays, ChannelHandles]:
    shapes = layout.shapes()
    if cuda_ring is not None:
        shapes = {k: v for k, v in shapes.items() if k not in DATA_ARRAYS}
    arrays = SharedArrays.create(shapes)
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
