"""The replay ring, on the learner device (DESIGN §8).

Chunks from replay ingress are copied in; `ptr`/`size` advance only after the
copy, so a sampled row is always a complete transition.
"""

from __future__ import annotations

import torch


class ReplayRing:
    def __init__(self, capacity: int, row_width: int, slices: dict[str, slice], device: torch.device,
                 seed: int) -> None:
        self.capacity = capacity
        self.storage = torch.zeros(capacity, row_width, dtype=torch.float32, device=device)
        self.slices = slices
        self.ptr = 0
        self.size = 0
        # Sampling has its own generator so lock-step runs sample the same rows.
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)

    def add(self, rows: torch.Tensor) -> None:
        n = rows.shape[0]
        first = min(n, self.capacity - self.ptr)
        self.storage[self.ptr:self.ptr + first].copy_(rows[:first], non_blocking=False)
        if first < n:
            self.storage[: n - first].copy_(rows[first:], non_blocking=False)
        # Advance only after the copy: a reader never sees a half-written row.
        self.ptr = (self.ptr + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch: int) -> dict[str, torch.Tensor]:
        idx = torch.randint(0, self.size, (batch,), generator=self.generator, device=self.storage.device)
        rows = self.storage[idx]
        return {name: rows[:, s] for name, s in self.slices.items()}
