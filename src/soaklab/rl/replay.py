"""The replay ring, on the learner device (DESIGN §8).

Chunks from replay ingress are copied in; `ptr`/`size` advance only after the
copy, so a sampled row is always a complete transition. The row count is kept
twice: a host int (bookkeeping, logs) and a device scalar that `sample` reads,
so a captured update samples from the rows present when it runs, without a
host read and with static shapes.
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
        self.size_t = torch.zeros((), dtype=torch.long, device=device)
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
        self.size_t.fill_(self.size)  # a fill kernel with the host value: no synchronisation

    def sample(self, batch: int) -> dict[str, torch.Tensor]:
        # Uniform over [0, size) with size on the device; the modulo bias is below 2**-40.
        draws = torch.randint(0, 2**62, (batch,), generator=self.generator, device=self.storage.device)
        idx = draws % self.size_t.clamp_min(1)
        rows = self.storage[idx]
        return {name: rows[:, s] for name, s in self.slices.items()}
