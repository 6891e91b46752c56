"""The replay ring, on the learner device (docs/runtime.md).

Chunks from replay ingress are copied in; `ptr`/`size` advance only after the
copy, so a sampled row is always a complete transition. The row count and the
write position are kept twice: host ints (bookkeeping, logs) and device scalars
that `sample` reads, so a captured update samples from the rows present when it
runs, without a host read and with static shapes.

Rows arrive one whole vector step at a time, in env order, so the ring is one
stream in which env e's next transition lies `stride` (= num_envs) rows after
its current one. An n-step sample walks that stream: it sums up to n discounted
rewards, stops at the first step that ended its episode, and bootstraps from the
last step's successor (a time-out keeps its bootstrap, a termination does not).
"""

from __future__ import annotations

import torch


class ReplayRing:
    def __init__(self, capacity: int, row_width: int, slices: dict[str, slice], device: torch.device,
                 seed: int, stride: int = 1, n_step: int = 1, gamma: float = 0.99) -> None:
        if n_step < 1:
            raise ValueError(f"n_step={n_step}: expected >= 1")
        self.capacity = capacity
        self.n_step_requested = n_step
        # A window must fit the ring: a replay smaller than n_step vectors (small test and smoke
        # budgets) samples shorter windows; the run summary records the effective length.
        n_step = max(1, min(n_step, capacity // max(stride, 1)))
        self.storage = torch.zeros(capacity, row_width, dtype=torch.float32, device=device)
        self.slices = slices
        self.ptr = 0
        self.size = 0
        self.size_t = torch.zeros((), dtype=torch.long, device=device)
        self.ptr_t = torch.zeros((), dtype=torch.long, device=device)
        self.stride, self.n_step, self.gamma = stride, n_step, gamma
        self._offsets = torch.arange(n_step, device=device) * stride
        self._discounts = gamma ** torch.arange(n_step + 1, dtype=torch.float32, device=device)
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
        self.size_t.fill_(self.size)  # fill kernels with the host values: no synchronisation
        self.ptr_t.fill_(self.ptr)

    def peek_rows(self, batch: int, samples: int) -> torch.Tensor:
        """[samples, batch]: the first rows of the windows the next `samples` calls of sample(batch)
        draw, from a copy of the sampling generator (this ring's is not advanced; a trace reads it,
        soaklab.rl.trace). Where the update is a CUDA graph, its warm-up draws too, once."""
        generator = torch.Generator(device=self.storage.device)
        generator.set_state(self.generator.get_state())
        rows = [self._starts(torch.randint(0, 2**62, (batch,), generator=generator, device=self.storage.device))
                for _ in range(samples)]
        return torch.stack(rows) if rows else torch.zeros(0, batch, dtype=torch.long, device=self.storage.device)

    def _starts(self, draws: torch.Tensor) -> torch.Tensor:
        windows = (self.size_t - (self.n_step - 1) * self.stride).clamp_min(1)
        return (self.ptr_t - self.size_t + draws % windows) % self.capacity  # the oldest row is ptr - size

    def sample(self, batch: int) -> dict[str, torch.Tensor]:
        """A batch of transitions: each field of the row layout, `reward` summed over the n-step
        window, and `discount` [B, 1], the factor of the bootstrap (gamma^steps taken)."""
        # Uniform over the rows with a whole window after them; the modulo bias is below 2**-40.
        start = self._starts(torch.randint(0, 2**62, (batch,), generator=self.generator, device=self.storage.device))
        rows = self.storage[start]
        out = {name: rows[:, s] for name, s in self.slices.items()}
        if self.n_step == 1:
            out["discount"] = self._discounts[1].expand(batch, 1)
            return out
        idx = (start[:, None] + self._offsets) % self.capacity  # [B, n]: the env's next n steps
        column = {name: self.slices[name].start for name in ("reward", "terminated", "truncated")}
        reward, terminated, truncated = (self.storage[idx, column[k]] for k in ("reward", "terminated", "truncated"))
        ended = (terminated + truncated) > 0
        # Step k counts while no earlier step of the window ended the episode.
        alive = torch.cumprod(torch.cat([torch.ones_like(reward[:, :1]), (~ended[:, :-1]).float()], dim=1), dim=1)
        out["reward"] = (reward * alive * self._discounts[:-1]).sum(1, keepdim=True)
        last = alive.sum(1).long() - 1  # the window's last step inside the episode
        tail = self.storage[idx.gather(1, last[:, None])[:, 0]]
        for name in ("next_obs", "next_critic", "terminated", "truncated"):
            out[name] = tail[:, self.slices[name]]
        out["discount"] = self._discounts[last + 1][:, None]
        return out
