"""The runtime's shapes: one value derived from the resolved settings and the task's spaces
(docs/runtime.md, "Rings and shapes").

The memory budget, the channels (shared memory or CUDA), the collector and the run summary all
read this value, so the bytes resolution records are the bytes the runtime allocates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soaklab.contract.contract import RuntimeSettings

# int64 words of the channels' control array; the protocol's counters (soaklab.rl.channels.C) must
# fit, which that module checks when it is imported. Fixed here so the budget needs no runtime code.
CONTROL_WORDS = 32

# Arrays that carry observations, actions and transitions; the rest are host-side bookkeeping
# (ingress row counts, control counters, collector metrics), always in shared memory.
INFERENCE_ARRAYS = ("ring_obs", "ring_dones", "ring_actions")
DATA_ARRAYS = (*INFERENCE_ARRAYS, "ingress")


@dataclass(frozen=True)
class TaskSpaces:
    """Observation and action widths of a task (the table is soaklab.tasks.spaces)."""

    actor_obs: int
    critic_obs: int
    action: int

    def row_widths(self) -> dict[str, int]:
        """One replay row, in order: obs | next_obs | critic | next_critic | action | reward | terminated |
        truncated."""
        return {"obs": self.actor_obs, "next_obs": self.actor_obs, "critic": self.critic_obs,
                "next_critic": self.critic_obs, "action": self.action, "reward": 1, "terminated": 1,
                "truncated": 1}

    @property
    def replay_row_width(self) -> int:
        return sum(self.row_widths().values())


def chunks_per_vector(num_envs: int, slot_rows: int) -> int:
    """Ingress chunks one collector vector of num_envs rows is published as: ceil(N / slot_rows)."""
    return -(-num_envs // slot_rows)


@dataclass(frozen=True)
class Layout:
    spaces: TaskSpaces
    num_envs: int
    capacity: int  # inference slots c
    depth: int  # ingress slots
    slot_rows: int
    num_metrics: int

    @property
    def obs_dim(self) -> int:
        return self.spaces.actor_obs

    @property
    def critic_dim(self) -> int:
        return self.spaces.critic_obs

    @property
    def action_dim(self) -> int:
        return self.spaces.action

    @property
    def row_width(self) -> int:
        return self.spaces.replay_row_width

    @property
    def group_bounds(self) -> list[tuple[int, int]]:
        """Contiguous env ranges [start, stop) of the c inference groups."""
        edges = np.linspace(0, self.num_envs, self.capacity + 1).round().astype(int)
        return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]

    @property
    def group_size(self) -> int:
        return max(b - a for a, b in self.group_bounds)

    @property
    def chunks_per_vector(self) -> int:
        return chunks_per_vector(self.num_envs, self.slot_rows)

    def row_slices(self) -> dict[str, slice]:
        out, start = {}, 0
        for name, width in self.spaces.row_widths().items():
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
            "control": ((CONTROL_WORDS,), "int64"),
            "metrics": ((max(self.num_metrics, 1),), "float64"),
        }

    def nbytes(self, array: str) -> int:
        shape, dtype = self.shapes()[array]
        return int(np.prod(shape)) * np.dtype(dtype).itemsize

    @property
    def inference_ring_bytes(self) -> int:
        return sum(self.nbytes(a) for a in INFERENCE_ARRAYS)

    @property
    def ingress_bytes(self) -> int:
        return self.nbytes("ingress")

    def shared_memory_arrays(self, carrier_is_cuda: bool) -> tuple[str, ...]:
        """The arrays that become /dev/shm segments: all of them on the host ring, only the
        bookkeeping when the data arrays live on the GPU."""
        return tuple(a for a in self.shapes() if not (carrier_is_cuda and a in DATA_ARRAYS))

    @property
    def semaphores(self) -> int:
        """Named semaphores of the hand-offs: observations and actions per slot, ingress free/filled."""
        return 2 * self.capacity + 2


def runtime_layout(settings: RuntimeSettings, num_envs: int, spaces: TaskSpaces, num_metrics: int) -> Layout:
    return Layout(spaces=spaces, num_envs=num_envs, capacity=settings.inference_slot_capacity,
                  depth=settings.replay_ingress_depth, slot_rows=settings.replay_ingress_slot_rows,
                  num_metrics=num_metrics)


def block_sizes(num_envs: int, clips: int, weights: tuple[float, ...] | None = None) -> list[int]:
    """Envs per clip. Without weights as even as can be, the first blocks one larger: 10 envs over 3
    clips -> 4, 3, 3. With weights (env.motion_weights) in their proportions, the envs left by rounding
    down going to the largest remainders, the first on a tie: 10 over (1, 3) -> 3, 7."""
    if weights is None:
        base, extra = divmod(num_envs, clips)
        return [base + (1 if k < extra else 0) for k in range(clips)]
    total = sum(weights)
    shares = [num_envs * w / total for w in weights]
    sizes = [int(s) for s in shares]
    by_remainder = sorted(range(clips), key=lambda k: (-(shares[k] - sizes[k]), k))
    for k in by_remainder[:num_envs - sum(sizes)]:
        sizes[k] += 1
    return sizes
