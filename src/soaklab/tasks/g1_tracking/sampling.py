"""Reset frame sampling for motion tracking: uniform, or adaptive toward failures (docs/assets-and-tasks.md)."""

from __future__ import annotations

import torch

from soaklab.tasks.rng import ManagerRng


class FrameSampler:
    """Start frames for resets.

    Adaptive mode keeps a decaying failure count per clip frame and draws start
    frames weighted by the failures in the following `lookahead` frames, so
    episodes start shortly before the parts of the clip that keep failing; a
    `uniform_ratio` share of the probability stays uniform so every frame is
    still visited. Either mode starts a `first_frame_ratio` share of resets at the clip's first
    frame (holosoma's 20 %): the part of a long clip an evaluation from its start must get through.
    """

    def __init__(self, num_frames: int, rng: ManagerRng, mode: str, uniform_ratio: float, alpha: float,
                 lookahead: int, first_frame_ratio: float = 0.0) -> None:
        if mode not in ("uniform", "adaptive"):
            raise ValueError(f"sampler mode {mode!r}")
        self.mode = mode
        self.rng = rng
        # The last frame cannot start an episode: there is no next reference frame.
        self.num_starts = num_frames - 1
        self.uniform_ratio = uniform_ratio
        self.alpha = alpha
        self.lookahead = lookahead
        self.first_frame_ratio = first_frame_ratio
        self.failures = torch.zeros(num_frames, device=rng.device)

    def probabilities(self) -> torch.Tensor:
        n = self.num_starts
        uniform = torch.full((n,), 1.0 / n, device=self.failures.device)
        if self.mode == "uniform":
            return uniform
        # Failures in [f, f + lookahead) for each start f, by a cumulative sum.
        csum = torch.cat([self.failures.new_zeros(1), self.failures.cumsum(0)])
        ends = torch.clamp(torch.arange(n, device=csum.device) + self.lookahead, max=len(self.failures))
        window = csum[ends] - csum[:n]
        total = window.sum()
        weighted = window / total.clamp_min(torch.finfo(window.dtype).tiny)
        # Decided on the device (no host read of the total): no failures yet means uniform.
        return torch.where(total > 0, self.uniform_ratio * uniform + (1 - self.uniform_ratio) * weighted, uniform)

    def sample(self, count: int) -> torch.Tensor:
        if self.mode == "uniform":
            frames = self.rng.randint(self.num_starts, (count,))
        else:
            frames = self.rng.categorical(self.probabilities(), count)
        if self.first_frame_ratio > 0:  # no draw at 0: the RNG stream of a run without it is unchanged
            first = self.rng.uniform((count,), 0.0, 1.0) < self.first_frame_ratio
            frames = torch.where(first, torch.zeros_like(frames), frames)
        return frames

    def record(self, frames: torch.Tensor, failed: torch.Tensor) -> None:
        """Decay old counts and add one at the frame of each env whose episode just failed
        (a weighted add over every env: no boolean indexing, so no host synchronisation)."""
        if self.mode != "adaptive":
            return
        self.failures.mul_(1 - self.alpha)
        self.failures.index_add_(0, frames, failed.to(self.failures.dtype))
